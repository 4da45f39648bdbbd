#pragma once
// Rotary position embedding, Hugging Face "rotate half" convention: within each head, element i
// pairs with i + head_dim/2 and both rotate by angle positions[t] * inv_freq[i]. Applied in
// place to the q and k parts of a fused qkv row.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/folded_norm.h"
#include "kernels/kv_store.h"

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
  // A norm folded into the qkv weights (folded_norm.h): when on, token t's q, k and v are
  // scaled by its scale (RopeKvStore only; v as it is stored).
  FoldedNormScale norm{};
};

// Rotates q and k in place (RopeKvStore's kernel with no cache writes; head_dim <= 256).
cudaError_t Rope(RopeParams p, cudaStream_t stream);

// Rope(rope) then KvStore(store) in one launch, with the same results bit for bit (without
// rope.norm on; with it, v is scaled as it is stored, which Rope alone cannot do): q and k are
// rotated in place, and each token's rotated k and its v are written to its cache slot (slot -1
// skipped). Requires store.k == rope.k, store.row_stride == rope.row_stride, the same
// num_tokens, store.kv_dim == num_kv_heads * head_dim and head_dim <= 256. The angles, which
// need only positions and inv_freq, are computed before the wait on the previous kernel (PDL).
cudaError_t RopeKvStore(const RopeParams& rope, const KvStoreParams& store, cudaStream_t stream);

}  // namespace rtgen::kernels
