#pragma once
// SwiGLU activation: out[t, i] = silu(in[t, i]) * in[t, inter + i], where each input row holds
// the gate projection then the up projection. Computed in fp32, stored bf16. With `norm` on (a
// norm folded into the gate/up weights, folded_norm.h), gate and up of token t are first scaled
// by its scale.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/folded_norm.h"

namespace rtgen::kernels {

struct SiluMulParams {
  const __nv_bfloat16* in = nullptr;  // [num_tokens, 2 * inter]
  __nv_bfloat16* out = nullptr;       // [num_tokens, inter]
  int32_t num_tokens = 0;
  int32_t inter = 0;
  FoldedNormScale norm{};
};

cudaError_t SiluMul(SiluMulParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
