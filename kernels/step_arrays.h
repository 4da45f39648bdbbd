#pragma once
// What a step's fixed buffers hold (step_buffers.h allocates them, pinned on the host and on the
// device, in one layout): their capacity and the pointers of one (tokens, seqs) layout. Plain
// structs without CUDA, so host code built everywhere (step_fill.h) fills them.

#include <cstdint>

#include "kernels/sample_row_params.h"

namespace rtgen {
namespace kernels {

// A position that marks a row to leave as it is (neither attended nor written): a mixed step's
// decode row, which decode attention has written (model_forward.h SplitsDecodeRows).
constexpr int32_t kPrefillKeepRow = -2;

}  // namespace kernels

struct StepCapacity {
  int32_t max_tokens = 0;          // tokens per step
  int32_t max_seqs = 0;            // sequences (and sampled rows) per step
  int32_t max_blocks_per_seq = 0;  // block table width
  // Penalty entries a step's rows may use in all (kernels/sample_penalties.h); 0: none.
  int32_t max_penalty_entries = 0;
};

// Pointers into one allocation (device or pinned host), laid out identically in both. Sizes
// are those of the layout the arrays were made for (StepBuffers::host / device).
struct StepArrays {
  int32_t* token_ids = nullptr;       // [tokens]
  int32_t* positions = nullptr;       // [tokens]
  int32_t* slot_mapping = nullptr;    // [tokens]
  int32_t* token_seq = nullptr;       // [tokens] sequence of each token
  // [tokens] A step of several sequences that is not decode-only: the positions prefill
  // attention reads, kPrefillKeepRow at its decode rows (ModelForward::SplitsDecodeRows).
  int32_t* attention_positions = nullptr;
  int32_t* context_lens = nullptr;    // [seqs]
  // [seqs] Such a step: the context length of each sequence decode attention serves (a decode
  // row), 0 for the others.
  int32_t* decode_context_lens = nullptr;
  int32_t* sample_rows = nullptr;     // [seqs] token row whose logits are computed
  kernels::SampleRowParams* sample_params = nullptr;  // [seqs]
  int32_t* block_tables = nullptr;    // [seqs, max_blocks_per_seq], -1 padded; last input
  int32_t* out_tokens = nullptr;      // [seqs] sampled token per logits row
  float* out_logprobs = nullptr;      // [seqs], right after out_tokens
  kernels::SampleTopEntry* out_top = nullptr;  // [seqs, kMaxTopLogprobs], right after them
  // [max_penalty_entries] in an allocation of its own (the same address for every layout),
  // copied by Upload only as far as the step uses it; null when the capacity has none.
  kernels::SamplePenaltyEntry* penalty_entries = nullptr;
};

}  // namespace rtgen
