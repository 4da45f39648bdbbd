#include "kernels/attention_common.cuh"
#include "kernels/launch.h"
#include "kernels/prefill_attention.h"
#include "kernels/prefill_attention_mma.h"

namespace rtgen::kernels {
namespace {

// grid (num_heads, num_tokens): one block per (token, head), keys streamed from the cache in
// chunks on CUDA cores (no reuse of K/V across the query tokens of a chunk): the fallback where
// the tensor-core kernel (prefill_attention_mma.h) does not apply.
__global__ void __launch_bounds__(kAttnThreads) PrefillAttentionKernel(PrefillAttentionParams p) {
  __shared__ AttnSmem smem;
  PdlWait();
  PdlLaunchDependents();
  const int head = blockIdx.x, t = blockIdx.y;
  const int seq = p.token_seq[t];
  const int end = min(p.positions[t] + 1, p.context_lens[seq]);
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  AttnState st;
  if (end > 0) {
    AttnLoadQuery(smem, p.q + t * p.q_stride + head * p.head_dim, p.head_dim, p.scale);
    AttnRange(smem, st, p.k_cache, p.v_cache, p.block_tables + seq * p.max_blocks_per_seq,
              p.block_size, p.num_kv_heads * p.head_dim, kv_head, p.head_dim, 0, end);
  }
  const float inv_l = st.l > 0.0f ? 1.0f / st.l : 0.0f;
  __nv_bfloat16* out = p.out + (static_cast<int64_t>(t) * p.num_heads + head) * p.head_dim;
#pragma unroll
  for (int u = 0; u < kAttnDimsPerThread; ++u) {
    const int d = threadIdx.x + u * kAttnThreads;
    if (d < p.head_dim) out[d] = __float2bfloat16(st.acc[u] * inv_l);
  }
}

}  // namespace

cudaError_t PrefillAttention(PrefillAttentionParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  if (p.head_dim > kAttnMaxHeadDim || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  if (p.tensor_cores && PrefillAttentionMmaSupports(p)) return PrefillAttentionMma(p, stream);
  return LaunchKernel(PrefillAttentionKernel, dim3(p.num_heads, p.num_tokens), kAttnThreads, 0,
                      stream, p);
}

}  // namespace rtgen::kernels
