#pragma once
// The host side of penalties on the device (kernels/sampling.h): which rows the device penalizes,
// and each such row's entries, one per distinct token of its prompt and known output with the
// token's output count. Host code without CUDA, built everywhere (tested by the CPU-only CI).
//
// A row is penalized on the device when the tokens its penalties read — the prompt's only with a
// repetition penalty, the output's always — are at most `max_row_tokens`, so a step of S rows
// needs at most S * min(max_row_tokens, vocab) entries (its distinct tokens can be no more than
// its tokens, nor than the vocabulary); a longer one is sampled on the host from its logits.
// The output's last token may be pending (engine/pending_token.h: drawn by the step still
// running): its id is read on the device from the step's embedding
// (SampleRowParams::penalty_pending).

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampling/sampling_params.h"
#include "kernels/sample_row_params.h"

namespace rtgen::kernels {

// The CUDA backend's default `max_row_tokens` (CudaBackendOptions::max_penalty_tokens).
inline constexpr int32_t kDefaultMaxPenaltyTokens = 4096;

// Whether `p` changes any logit before sampling (a penalty not at its neutral value).
bool HasPenalties(const SamplingParams& p);

// Whether a row with these parameters and token counts is penalized on the device (see above).
bool PenalizesOnDevice(const SamplingParams& p, size_t prompt_tokens, size_t output_tokens,
                       int32_t max_row_tokens);

class PenaltyEntryBuilder {
 public:
  explicit PenaltyEntryBuilder(int32_t vocab);

  // Appends the row's entries to entries[*used, ...) and advances *used; sets rp's penalty
  // fields (rp.penalty_begin is the old *used). The prompt's tokens are entries only with a
  // repetition penalty (presence and frequency read the output only); tokens outside the
  // vocabulary are skipped, as the CPU sampler skips them. `pending_row` is the step's token
  // row whose id is the output's last token when that is pending (-1 otherwise). Errors
  // (nothing appended): a pending token that is not the output's last, a pending last token
  // without pending_row, or no room.
  absl::Status Append(const SamplingParams& params, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, int32_t pending_row,
                      std::span<SamplePenaltyEntry> entries, int32_t* used,
                      SampleRowParams* rp);

 private:
  // [vocab]: the entry index (relative to the row's first) of each token of the row being
  // built, -1 elsewhere; back to all -1 after every Append.
  std::vector<int32_t> index_;
};

}  // namespace rtgen::kernels
