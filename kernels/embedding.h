#pragma once
// Token embedding gather: out[t] = table[token_ids[t]] (bf16 table, fp32 residual stream).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct EmbeddingParams {
  const __nv_bfloat16* table = nullptr;  // [vocab, hidden]
  const int32_t* token_ids = nullptr;    // [num_tokens]; ids outside [0, vocab) give zeros
  float* out = nullptr;                  // [num_tokens, hidden]
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int32_t vocab = 0;
};

cudaError_t Embedding(EmbeddingParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
