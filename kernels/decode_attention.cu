#include <algorithm>

#include "kernels/attention_common.cuh"
#include "kernels/decode_attention.h"

namespace rtgen::kernels {
namespace {

// grid (num_heads, num_seqs, num_splits)
__global__ void __launch_bounds__(kAttnThreads) DecodeAttentionKernel(DecodeAttentionParams p) {
  __shared__ AttnSmem smem;
  const int head = blockIdx.x, seq = blockIdx.y, split = blockIdx.z;
  const int ctx = p.context_lens[seq];
  const int begin = p.num_splits > 1 ? split * p.partition_size : 0;
  const int end = p.num_splits > 1 ? min(ctx, begin + p.partition_size) : ctx;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  AttnState st;
  if (begin < end) {
    AttnLoadQuery(smem, p.q + seq * p.q_stride + head * p.head_dim, p.head_dim, p.scale);
    AttnRange(smem, st, p.k_cache, p.v_cache, p.block_tables + seq * p.max_blocks_per_seq,
              p.block_size, p.num_kv_heads * p.head_dim, kv_head, p.head_dim, begin, end);
  }
  if (p.num_splits == 1) {
    const float inv_l = st.l > 0.0f ? 1.0f / st.l : 0.0f;
    __nv_bfloat16* out = p.out + (static_cast<int64_t>(seq) * p.num_heads + head) * p.head_dim;
#pragma unroll
    for (int u = 0; u < kAttnDimsPerThread; ++u) {
      const int d = threadIdx.x + u * kAttnThreads;
      if (d < p.head_dim) out[d] = __float2bfloat16(st.acc[u] * inv_l);
    }
    return;
  }
  const int64_t part = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits + split;
  float* out = p.partial_out + part * p.head_dim;
#pragma unroll
  for (int u = 0; u < kAttnDimsPerThread; ++u) {
    const int d = threadIdx.x + u * kAttnThreads;
    if (d < p.head_dim) out[d] = st.acc[u];
  }
  if (threadIdx.x == 0) {
    p.partial_ml[part * 2] = st.m;
    p.partial_ml[part * 2 + 1] = st.l;
  }
}

// grid (num_heads, num_seqs): merges the partitions' partial results.
__global__ void DecodeCombineKernel(DecodeAttentionParams p) {
  const int head = blockIdx.x, seq = blockIdx.y;
  const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
  float m = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) {
    if (p.partial_ml[(first + s) * 2 + 1] > 0.0f) m = fmaxf(m, p.partial_ml[(first + s) * 2]);
  }
  float l = 0.0f;
  for (int s = 0; s < p.num_splits; ++s) {
    const float ls = p.partial_ml[(first + s) * 2 + 1];
    if (ls > 0.0f) l += ls * expf(p.partial_ml[(first + s) * 2] - m);
  }
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  __nv_bfloat16* out = p.out + (static_cast<int64_t>(seq) * p.num_heads + head) * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float ls = p.partial_ml[(first + s) * 2 + 1];
      if (ls > 0.0f) {
        acc += p.partial_out[(first + s) * p.head_dim + d] *
               expf(p.partial_ml[(first + s) * 2] - m);
      }
    }
    out[d] = __float2bfloat16(acc * inv_l);
  }
}

}  // namespace

cudaError_t DecodeAttention(DecodeAttentionParams p, cudaStream_t stream) {
  if (p.num_seqs <= 0) return cudaSuccess;
  if (p.head_dim > kAttnMaxHeadDim || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 ||
      p.num_splits < 1 || (p.num_splits > 1 && p.partition_size <= 0)) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(p.num_heads, p.num_seqs, p.num_splits);
  DecodeAttentionKernel<<<grid, kAttnThreads, 0, stream>>>(p);
  if (p.num_splits > 1) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    DecodeCombineKernel<<<dim3(p.num_heads, p.num_seqs), 128, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

DecodeSplitPlan PlanDecodeSplits(int32_t num_seqs, int32_t num_heads, int32_t max_context,
                                 int32_t num_sms) {
  constexpr int32_t kPartition = 512;  // tokens per partition
  DecodeSplitPlan plan;
  const int64_t blocks = int64_t{num_seqs} * num_heads;
  if (max_context <= kPartition || blocks >= 2 * int64_t{num_sms}) return plan;
  // Enough partitions to give each SM about two blocks, never more than the context needs.
  const int32_t want = static_cast<int32_t>((2 * int64_t{num_sms} + blocks - 1) / blocks);
  const int32_t most = (max_context + kPartition - 1) / kPartition;
  plan.num_splits = std::max(1, std::min(want, most));
  if (plan.num_splits > 1) plan.partition_size = (max_context + plan.num_splits - 1) / plan.num_splits;
  // Round partitions up to whole key chunks.
  if (plan.num_splits > 1) {
    plan.partition_size = (plan.partition_size + kAttnKeyChunk - 1) / kAttnKeyChunk * kAttnKeyChunk;
  }
  return plan;
}

}  // namespace rtgen::kernels
