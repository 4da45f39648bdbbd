#pragma once
// 1 / sqrt(mean(row^2) + eps) of one bf16 row, summed in fp32 by a whole block: the RMSNorm
// scale that a consumer of a folded norm applies itself (model_forward.h, folded norms).

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/folded_norm.h"

namespace rtgen::kernels {

// Loads a thread issues at once on the vector path (up to kRowLoads * blockDim.x * 8 elements).
constexpr int kRowLoads = 8;

// Every thread of the block must call it (it holds barriers) and gets the result. `scratch`:
// >= 32 floats of shared memory. Where hidden % 8 == 0, the row is 16-byte aligned and fits
// kRowLoads 16-byte loads per thread, every load of a thread is issued before the first sum, so
// the row costs one memory round trip.
__device__ __forceinline__ float BlockRowInvRms(const __nv_bfloat16* row, int hidden, float eps,
                                                float* scratch) {
  float sum_sq = 0.0f;
  const int n8 = hidden / 8;
  if (hidden % 8 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0 &&
      n8 <= kRowLoads * static_cast<int>(blockDim.x)) {
    const uint4* r8 = reinterpret_cast<const uint4*>(row);
    uint4 v[kRowLoads];
#pragma unroll
    for (int j = 0; j < kRowLoads; ++j) {
      const int c = threadIdx.x + j * blockDim.x;
      v[j] = c < n8 ? r8[c] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kRowLoads; ++j) {
      float f[8];
      UnpackBf16x8(v[j], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += f[e] * f[e];
    }
  } else {
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float f = __bfloat162float(row[j]);
      sum_sq += f * f;
    }
  }
  sum_sq = BlockSum(sum_sq, scratch);
  return rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
}

// Token t's folded-norm scale, 1 when the scale is off. Block-wide, as BlockRowInvRms (called
// after the PDL wait: the rows are earlier kernels' output).
__device__ __forceinline__ float TokenScale(const FoldedNormScale& s, int t, float* scratch) {
  if (!s.on()) return 1.0f;
  return BlockRowInvRms(s.rows + static_cast<int64_t>(t) * s.hidden, s.hidden, s.eps, scratch);
}

}  // namespace rtgen::kernels
