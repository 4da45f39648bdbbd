#pragma once
// A test-only KV writer for the decode attention prefetch test: like kernels/kv_store.h KvStore,
// but it releases its programmatic dependent right after its own wait and then spins for
// `delay_ns` before it writes, so a dependent launched after it (decode attention) is running
// while the new keys are still unwritten: a copy issued before the dependent's wait reads the old
// values.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kv_store.h"

namespace rtgen::testing_gpu {

cudaError_t SlowKvStore(const kernels::KvStoreParams& p, int64_t delay_ns, cudaStream_t stream);

}  // namespace rtgen::testing_gpu
