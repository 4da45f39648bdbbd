#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"

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

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
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
  if (auto s = CheckRange("sampling.repetition_penalty", repetition_penalty, 0.0f, 10.0f,
                          /*lo_open=*/true);
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
                                      int32_t max_stop_string_bytes) const {
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
    if (!IsValidUtf8(s)) {
      return absl::InvalidArgumentError(absl::StrCat("stopping.stop[", i, "] is not valid UTF-8"));
    }
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
