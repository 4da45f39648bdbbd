#pragma once
// The pre-rewrite decode GEMV (see gemv_bench_legacy.cu); m in {1, 2, 4, 8} only.

#include <cuda_runtime.h>

#include "kernels/gemv.h"

namespace rtgen::bench {

cudaError_t LegacyGemv(const kernels::GemvParams& p, cudaStream_t stream);

}  // namespace rtgen::bench
