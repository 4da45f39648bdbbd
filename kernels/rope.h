#pragma once
// Rotary position embedding, Hugging Face "rotate half" convention: within each head, element i
// pairs with i + head_dim/2 and both rotate by angle positions[t] * inv_freq[i]. Applied in
// place to the q and k parts of a fused qkv row.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct RopeParams {
  __nv_bfloat16* q = nullptr;          // token t, head h at q + t * row_stride + h * head_dim
  __nv_bfloat16* k = nullptr;          // same layout with num_kv_heads heads
  int64_t row_stride = 0;              // elements between consecutive tokens
  const int32_t* positions = nullptr;  // [num_tokens] absolute positions
  const float* inv_freq = nullptr;     // [head_dim / 2] radians per position
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                // even
};

cudaError_t Rope(RopeParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
