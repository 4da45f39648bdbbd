#pragma once
// The fake backend's stand-in resolution: it runs each step inside Launch, so a PendingToken in
// a pipelined step's input is filled in on the host from the previous step's sampled tokens.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/backend.h"
#include "engine/pending_token.h"

namespace rtgen::testing {

// A copy of `in` with every PendingToken(j) replaced by prev_sampled[j], in the token ids and
// at the end of the samples' outputs (whose copies live in *outputs, which must outlive
// *resolved). INVALID_ARGUMENT when a stand-in names no sample of the previous step.
inline absl::Status ResolvePendingTokens(const StepInput& in,
                                         const std::vector<int32_t>& prev_sampled,
                                         StepInput* resolved,
                                         std::vector<std::vector<int32_t>>* outputs) {
  auto resolve = [&prev_sampled](int32_t id, const char* where, size_t at) -> absl::StatusOr<int32_t> {
    if (!IsPendingToken(id)) return id;
    const int32_t j = PendingSampleIndex(id);
    if (j >= static_cast<int32_t>(prev_sampled.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "[", at, "] = ", id, " names sample ", j, " of the previous step, which sampled ",
          prev_sampled.size()));
    }
    return prev_sampled[static_cast<size_t>(j)];
  };
  *resolved = in;
  for (size_t t = 0; t < resolved->token_ids.size(); ++t) {
    absl::StatusOr<int32_t> id = resolve(resolved->token_ids[t], "token_ids", t);
    if (!id.ok()) return id.status();
    resolved->token_ids[t] = *id;
  }
  outputs->assign(in.samples.size(), {});
  for (size_t i = 0; i < in.samples.size(); ++i) {
    SampleRequest& s = resolved->samples[i];
    if (s.output.empty() || !IsPendingToken(s.output.back())) continue;
    std::vector<int32_t>& copy = (*outputs)[i];
    copy.assign(s.output.begin(), s.output.end());
    absl::StatusOr<int32_t> id = resolve(copy.back(), "samples[].output", i);
    if (!id.ok()) return id.status();
    copy.back() = *id;
    s.output = copy;
  }
  return absl::OkStatus();
}

}  // namespace rtgen::testing
