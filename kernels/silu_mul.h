#pragma once
// SwiGLU activation: out[t, i] = silu(in[t, i]) * in[t, inter + i], where each input row holds
// the gate projection then the up projection. Computed in fp32, stored bf16. With rms_rows set
// (a norm folded into the gate/up weights, model_forward.h), gate and up of token t are first
// scaled by 1 / sqrt(mean(rms_rows[t]^2) + eps), the scale that norm would have applied to x.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct SiluMulParams {
  const __nv_bfloat16* in = nullptr;  // [num_tokens, 2 * inter]
  __nv_bfloat16* out = nullptr;       // [num_tokens, inter]
  int32_t num_tokens = 0;
  int32_t inter = 0;
  const __nv_bfloat16* rms_rows = nullptr;  // [num_tokens, hidden] or null
  int32_t hidden = 0;
  float eps = 0.0f;
};

cudaError_t SiluMul(SiluMulParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
