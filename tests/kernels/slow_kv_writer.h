#pragma once
// Test-only PDL kernels. A KV writer for the attention tests' ordering checks: like KvStore,
// but it releases its programmatic dependent right after its own wait and then spins for
// `delay_ns` before it writes, so a dependent launched after it (decode attention) is running
// while the new keys are still unwritten: a copy issued before the dependent's wait reads the old
// values.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kv_store.h"

namespace rtgen::testing_gpu {

cudaError_t SlowKvStore(const kernels::KvStoreParams& p, int64_t delay_ns, cudaStream_t stream);

// A programmatic dependent that copies n bf16 values from src to dst after its wait: it reads
// what every launch before it wrote only if each of those launches' grids completed after its
// own wait (kernels/launch.h), early-returning blocks included.
cudaError_t PdlCopy(const uint16_t* src, uint16_t* dst, int64_t n, cudaStream_t stream);

}  // namespace rtgen::testing_gpu
