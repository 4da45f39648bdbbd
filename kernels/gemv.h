#pragma once
// Small-batch bf16 matrix-vector product for decode: y[m, n] = sum_k x[m, k] * w[n, k] for
// m <= kGemvMaxRows, fp32 accumulation. One warp per output feature streams its weight row once
// with 16-byte loads and applies it to every input row.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

constexpr int kGemvMaxRows = 8;

struct GemvParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major, 16-byte aligned rows
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (HF weight layout)
  void* y = nullptr;                 // [m, n] row-major, bf16 or fp32
  bool y_f32 = false;
  int32_t m = 0;                     // 1..kGemvMaxRows
  int32_t n = 0;
  int32_t k = 0;                     // multiple of 8
};

// True when `p`'s shape and alignment suit the kernel.
bool GemvSupported(const GemvParams& p);
cudaError_t Gemv(GemvParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
