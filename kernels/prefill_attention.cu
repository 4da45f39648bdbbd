#include "kernels/attention_common.cuh"
#include "kernels/launch.h"
#include "kernels/prefill_attention.h"
#include "kernels/prefill_attention_mma.h"
#include "kernels/prefill_runs.h"

namespace rtgen::kernels {
namespace {

// grid (num_heads, num_tokens): one block per (token, head), keys streamed from the cache in
// chunks on CUDA cores (no reuse of K/V across the query tokens of a chunk): where the
// tensor-core kernel (prefill_attention_mma.h) does not apply, and with kManyRunsOnly for the
// tokens of the blocks of more than kPrefillMaxRuns runs, which that kernel leaves
// (prefill_runs.h; the other blocks return at once).
template <bool kManyRunsOnly>
__global__ void __launch_bounds__(kAttnThreads) PrefillAttentionKernel(PrefillAttentionParams p) {
  __shared__ AttnSmem smem;
  // Before the PDL wait, the step's own inputs (token sequences, positions, context lengths:
  // uploaded before the step's first kernel, written by none); q, keys and values after it.
  if constexpr (kManyRunsOnly) {
    __shared__ int32_t s_seq[kPrefillBlockRows];  // as the tensor-core kernel reads them
    static_assert(kPrefillBlockRows <= kAttnThreads);
    if (threadIdx.x < kPrefillBlockRows) {
      const int tok = blockIdx.y / kPrefillBlockRows * kPrefillBlockRows + threadIdx.x;
      const bool in = tok < p.num_tokens && p.positions[tok] >= 0;
      s_seq[threadIdx.x] = in ? p.token_seq[tok] : -1;
    }
    __syncthreads();
    if (PrefillRuns(s_seq) <= kPrefillMaxRuns) {  // the tensor-core kernel's (whole block)
      PdlWait();  // launch.h: a grid completes only after its wait, early returns too
      return;
    }
  }
  const int head = blockIdx.x, t = blockIdx.y;
  const int seq = p.token_seq[t];
  const int end = min(p.positions[t] + 1, p.context_lens[seq]);
  PdlWait();
  PdlLaunchDependents();
  if (p.positions[t] == kPrefillKeepRow) return;  // decode attention's row (SplitsDecodeRows)
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
  const dim3 grid(p.num_heads, p.num_tokens);
  if (p.tensor_cores && PrefillAttentionMmaSupports(p)) {
    const cudaError_t err = PrefillAttentionMma(p, stream);
    // One sequence: every block is one run, all the tensor-core kernel's.
    if (err != cudaSuccess || p.num_seqs == 1) return err;
    return LaunchKernel(PrefillAttentionKernel<true>, grid, kAttnThreads, 0, stream, p);
  }
  return LaunchKernel(PrefillAttentionKernel<false>, grid, kAttnThreads, 0, stream, p);
}

}  // namespace rtgen::kernels
