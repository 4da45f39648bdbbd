#pragma once
// A mixed step's decode rows: in a step that prefills some sequences and decodes others, decode
// attention (split over the keys, tensor cores) serves each one-token sequence s whose token is
// row s of the step (the scheduler puts a step's decode rows first), and prefill attention the
// other rows. Prefill attention alone gives a block of rows with more than kPrefillMaxRuns
// sequences (prefill_runs.h) to its CUDA-core kernel, one block per (token, head) walking the
// whole context in order: SmolLM2-135M's mixed step of 4 decode rows at context 129 and a
// 16-token prompt took 2.2 ms that way, against 0.6 for the prompt alone (H200, session 42).
//
// One launch per step works out, from the step arrays alone, which rows decode attention serves:
// their context lengths for it (0 for every other sequence, which it then skips) and, for prefill
// attention, the step's positions with kPrefillKeepRow at those rows (left as decode attention
// wrote them). Decode attention runs first, then prefill attention (model_forward.cc).

#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct MixedRowsParams {
  const int32_t* token_seq = nullptr;     // [num_tokens] the step's arrays (step_buffers.h)
  const int32_t* positions = nullptr;     // [num_tokens] < 0: padding
  const int32_t* context_lens = nullptr;  // [num_seqs]
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  // Out, [num_seqs]: context_lens[s] where decode attention serves sequence s (one token, at row
  // s, not padding), else 0.
  int32_t* decode_context_lens = nullptr;
  // Out, [num_tokens]: positions, with kPrefillKeepRow at the rows decode attention serves.
  int32_t* attention_positions = nullptr;
};

cudaError_t MixedDecodeRows(const MixedRowsParams& p, cudaStream_t stream);

}  // namespace rtgen::kernels
