#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/common/utf8.h"

namespace rtgen {
namespace {

// Checks lo <= value <= hi (with optionally open ends) and that `value` is finite.
absl::Status CheckRange(const char* field, float value, float lo, float hi,
                        bool lo_open = false) {
  const bool ok = std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " must be in ", lo_open ? "(" : "[", lo,
                                                 ", ", hi, "], got ", value));
}

absl::Status CheckIntRange(const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be in [", lo, ", ", hi, "], got ", value));
}

}  // namespace

absl::Status SamplingParams::Validate(int32_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0.0f || temperature > 100.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.temperature must be in [0, 100], got ", temperature));
  }
  if (auto s = CheckIntRange("sampling.top_k", top_k, 0, vocab_size); !s.ok()) return s;
  if (auto s = CheckRange("sampling.top_p", top_p, 0.0f, 1.0f, /*lo_open=*/true); !s.ok()) {
    return s;
  }
  if (auto s = CheckRange("sampling.min_p", min_p, 0.0f, 1.0f); !s.ok()) return s;
  // At least 0.01: a penalty divides positive logits, and a tiny one overflowed them to inf.
  if (auto s = CheckRange("sampling.repetition_penalty", repetition_penalty, 0.01f, 10.0f);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckRange("sampling.presence_penalty", presence_penalty, -2.0f, 2.0f); !s.ok()) {
    return s;
  }
  if (auto s = CheckRange("sampling.frequency_penalty", frequency_penalty, -2.0f, 2.0f);
      !s.ok()) {
    return s;
  }
  return CheckIntRange("sampling.logprobs", logprobs, 0, 20);
}

absl::Status StoppingParams::Validate(int32_t vocab_size, int32_t max_stop_strings,
                                      int32_t max_stop_string_bytes,
                                      int32_t max_stop_token_ids) const {
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stopping.max_tokens must be >= 1, got ", max_tokens));
  }
  if (stop.size() > static_cast<size_t>(max_stop_strings)) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.stop has ", stop.size(),
                                                   " strings, at most ", max_stop_strings,
                                                   " allowed"));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string& s = stop[i];
    if (s.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stopping.stop[", i, "] is empty"));
    }
    if (s.size() > static_cast<size_t>(max_stop_string_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("stopping.stop[", i, "] is ", s.size(),
                                                     " bytes, at most ", max_stop_string_bytes,
                                                     " allowed"));
    }
    if (FindInvalidUtf8(s).has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("stopping.stop[", i, "] is not valid UTF-8"));
    }
  }
  if (stop_token_ids.size() > static_cast<size_t>(max_stop_token_ids)) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.stop_token_ids has ",
                                                   stop_token_ids.size(), " ids, at most ",
                                                   max_stop_token_ids, " allowed"));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    const int32_t id = stop_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("stopping.stop_token_ids[", i,
                                                     "] must be in [0, ", vocab_size, "), got ",
                                                     id));
    }
  }
  return absl::OkStatus();
}

}  // namespace rtgen
