#pragma once
// The CUDA backend's check of a step's input (engine/backend.h StepInput) before it fills its
// fixed step buffers: every array's size, every index into the buffers, the KV pool and the
// vocabulary, and the rules of its decode-only steps, refused with an error that names the field
// and the entry. Host code without CUDA, built everywhere, so the CPU-only CI tests it
// (tests/kernels_host).

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "engine/backend.h"

namespace rtgen {

// What a step may hold: the step buffers' capacity (StepCapacity), the KV pool, the vocabulary.
struct CudaStepLimits {
  int32_t max_tokens = 0;
  int32_t max_seqs = 0;            // sequences, and sampled rows
  int32_t max_blocks_per_seq = 0;  // block table width
  int32_t block_size = 0;          // tokens a KV block
  int32_t num_blocks = 0;          // blocks in the pool
  int32_t vocab_size = 0;
};

// OK when the step fits the limits and is well formed:
// - 1..max_tokens tokens and 1..max_seqs sequences; positions and slot_mapping one per token;
//   query_start from 0 to the token count, never decreasing;
// - each sequence's context fits its block table row, whose blocks up to that context are in the
//   pool, and each of its tokens' positions is inside its context;
// - a decode-only step has one token a sequence, at its context's last position, stored to that
//   position's slot or nowhere (-1): decode attention may read the older keys before the step's
//   own are written;
// - every token is stored to its position's slot through its block table or nowhere (-1), so
//   that no key lands in another position's slot, and no two tokens of the step are stored to
//   one slot (a repeated position, or two sequences writing one block: the stores would race);
// - slot_mapping entries are -1 or slots of the pool; token ids are in the vocabulary or
//   PendingToken stand-ins for which `pending_row` (the logits row of the step launched before,
//   -1 when it did not sample that token on the device or a launch after it failed once its
//   sampler was queued: CudaBackend) gives a row;
// - every sample names a sequence with tokens in this step and has valid parameters
//   (SamplingParams::Validate over the vocabulary); at most max_seqs.
absl::Status CheckCudaStep(const StepInput& in, const CudaStepLimits& cap,
                           absl::FunctionRef<int32_t(int32_t)> pending_row);

}  // namespace rtgen
