#pragma once
// Writes each token's k and v into the paged cache. Cache layout per layer:
// [num_blocks, block_size, num_kv_heads, head_dim] bf16, so slot s = block * block_size + offset
// starts at element s * num_kv_heads * head_dim. Tokens with slot -1 (padding) are skipped.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct KvStoreParams {
  const __nv_bfloat16* k = nullptr;       // token t at k + t * row_stride: [num_kv_heads * head_dim]
  const __nv_bfloat16* v = nullptr;       // same layout
  int64_t row_stride = 0;                 // elements between consecutive tokens
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  const int32_t* slot_mapping = nullptr;  // [num_tokens], -1 = skip
  int32_t num_tokens = 0;
  int32_t kv_dim = 0;                     // num_kv_heads * head_dim
};

cudaError_t KvStore(KvStoreParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
