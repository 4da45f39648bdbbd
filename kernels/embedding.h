#pragma once
// Token embedding gather: out[t] = table[token_ids[t]] (bf16 table, fp32 residual stream).
// A negative id -1 - r is a pending token: the one the previous step sampled in logits row r,
// read from pending_tokens[r] (SampleTokensParams::chain_token_ids of that step).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct EmbeddingParams {
  const __nv_bfloat16* table = nullptr;  // [vocab, hidden]
  const int32_t* token_ids = nullptr;    // [num_tokens]; ids outside [0, vocab) give zeros
  float* out = nullptr;                  // [num_tokens, hidden]; unused when out16 is set
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int32_t vocab = 0;
  // [rows of the previous step] tokens it sampled; null: negative ids give zeros. Written only
  // by an earlier step's sampling kernel, so it may be read before the PDL wait.
  const int32_t* pending_tokens = nullptr;
  // [num_tokens, hidden]: the rows as bf16 (exact copies of the table's) instead of fp32 into
  // `out` (the bf16 residual stream of model_forward.h's folded-norm steps).
  __nv_bfloat16* out16 = nullptr;
  // Optional [num_tokens] out: each token's vocabulary id as read (a pending one resolved), for
  // the step's sampler (SampleTokensParams::resolved_token_ids). Written after the PDL wait: the
  // previous step's sampler may still read its own.
  int32_t* resolved_ids = nullptr;
  // A plain stream-ordered launch instead of a programmatic dependent one: token_ids were
  // written by the kernel before it (StepBuffers::StageIn), and the kernel reads them before
  // its PDL wait.
  bool plain_launch = false;
};

cudaError_t Embedding(EmbeddingParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
