#pragma once
// Causal paged attention for prefill chunks (and mixed batches): every query token attends to
// the positions [0, positions[t]] of its sequence (capped by context_lens), read through the
// block table from the paged cache, which already holds this step's keys and values (kv_store
// runs first). Earlier chunks' keys are therefore seen without special cases.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/step_arrays.h"

namespace rtgen::kernels {

// kPrefillKeepRow (step_arrays.h): a position that marks a row to leave as it is.

struct PrefillAttentionParams {
  const __nv_bfloat16* q = nullptr;        // token t, head h at q + t * q_stride + h * head_dim
  int64_t q_stride = 0;
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const __nv_bfloat16* v_cache = nullptr;
  const int32_t* token_seq = nullptr;      // [num_tokens] the sequence each token belongs to
  // [num_tokens] absolute positions (< 0: no keys; -1 writes zeros, kPrefillKeepRow nothing)
  const int32_t* positions = nullptr;
  const int32_t* block_tables = nullptr;   // [num_seqs, max_blocks_per_seq]
  const int32_t* context_lens = nullptr;   // [num_seqs]
  __nv_bfloat16* out = nullptr;            // [num_tokens, num_heads * head_dim]
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                    // <= 256
  int32_t block_size = 0;
  int32_t max_blocks_per_seq = 0;
  float scale = 1.0f;
  // The step's sequences: with 1, no block of tokens mixes sequences (prefill_runs.h) and the
  // CUDA-core kernel is not launched beside the tensor-core one; 0: not known.
  int32_t num_seqs = 0;
  // False: always the CUDA-core kernel (tests, and A/B through RTGEN_PREFILL_MMA=0); true: the
  // tensor-core kernel where it applies (prefill_attention_mma.h), for the blocks of at most
  // kPrefillMaxRuns runs, and the CUDA-core kernel for the other blocks' tokens.
  bool tensor_cores = true;
  // The tensor-core kernel's key groups a block: 0 chosen by the grid (prefill_attention_mma.cu
  // LaunchFitting), 1 or 2 forced (tests).
  int32_t key_groups = 0;
};

cudaError_t PrefillAttention(PrefillAttentionParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
