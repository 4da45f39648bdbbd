#pragma once
// Seeded pseudo-random fills on the device, for weights at real shapes without host copies
// (benchmarks). Value i of a tensor depends only on (seed, tensor_id, i): a counter-based hash
// (splitmix64) gives two uniforms, Box-Muller turns them into a normal sample. Values are never
// exactly zero (a sample within 1e-3 * stddev of the mean is pushed out to that distance).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct RandomFillParams {
  uint64_t seed = 0;
  uint64_t tensor_id = 0;  // distinguishes tensors drawn with one seed
  float mean = 0.0f;
  float stddev = 1.0f;     // > 0
};

// out[i] ~ normal(mean, stddev), i < n.
cudaError_t RandomFillBf16(__nv_bfloat16* out, int64_t n, RandomFillParams p, cudaStream_t stream);
cudaError_t RandomFillF32(float* out, int64_t n, RandomFillParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
