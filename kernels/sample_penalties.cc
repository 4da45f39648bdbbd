#include "kernels/sample_penalties.h"

#include "absl/strings/str_cat.h"
#include "engine/pending_token.h"

namespace rtgen::kernels {

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f;
}

bool PenalizesOnDevice(const SamplingParams& p, size_t prompt_tokens, size_t output_tokens,
                       int32_t max_row_tokens) {
  const size_t read = (p.repetition_penalty != 1.0f ? prompt_tokens : 0) + output_tokens;
  return HasPenalties(p) && max_row_tokens > 0 && read <= static_cast<size_t>(max_row_tokens);
}

PenaltyEntryBuilder::PenaltyEntryBuilder(int32_t vocab) : index_(vocab > 0 ? vocab : 0, -1) {}

absl::Status PenaltyEntryBuilder::Append(const SamplingParams& params,
                                         std::span<const int32_t> prompt,
                                         std::span<const int32_t> output, int32_t pending_row,
                                         std::span<SamplePenaltyEntry> entries, int32_t* used,
                                         SampleRowParams* rp) {
  const bool pending_last = !output.empty() && IsPendingToken(output.back());
  const std::span<const int32_t> known = pending_last ? output.first(output.size() - 1) : output;
  for (size_t i = 0; i < known.size(); ++i) {
    if (IsPendingToken(known[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output token ", i, " of ", output.size(), " is pending; only the last may be"));
    }
  }
  if (pending_last && pending_row < 0) {
    return absl::InvalidArgumentError("the output's last token is pending but no row names it");
  }
  const int32_t begin = *used;
  const int32_t vocab = static_cast<int32_t>(index_.size());
  int32_t n = 0;
  bool room = true;
  const auto add = [&](int32_t t, int32_t count) {
    if (t < 0 || t >= vocab) return;  // the CPU sampler skips these too
    if (index_[t] < 0) {
      if (static_cast<size_t>(begin) + n >= entries.size()) {
        room = false;
        return;
      }
      index_[t] = n;
      entries[begin + n] = {t, 0};
      ++n;
    }
    entries[begin + index_[t]].output_count += count;
  };
  if (params.repetition_penalty != 1.0f) {
    for (int32_t t : prompt) add(t, 0);
  }
  for (int32_t t : known) add(t, 1);
  for (int32_t i = 0; i < n; ++i) index_[entries[begin + i].token] = -1;
  if (!room) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "penalty entries: a row needs more than the ", entries.size() - begin, " left"));
  }
  *used = begin + n;
  rp->repetition_penalty = params.repetition_penalty;
  rp->presence_penalty = params.presence_penalty;
  rp->frequency_penalty = params.frequency_penalty;
  rp->penalty_begin = begin;
  rp->penalty_count = n;
  rp->penalty_pending = pending_last ? pending_row : -1;
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
