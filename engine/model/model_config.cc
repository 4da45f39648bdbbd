#include "engine/model/model_config.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rtgen {

namespace {

absl::Status NotPositive(const char* field, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " must be positive, got ", value));
}

// A real parameter must be finite and positive: +inf passes `> 0` (an infinite rope_theta turns
// RoPE off past the first pair of dimensions; an infinite rms_norm_eps zeroes every norm).
bool FinitePositive(float value) { return std::isfinite(value) && value > 0.0f; }

absl::Status NotFinite(const char* field, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " must be finite and positive, got ", value));
}

}  // namespace

absl::StatusOr<float> NarrowToFloat(double value, const std::string& field) {
  if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, " is not a finite 32-bit float"));
  }
  return static_cast<float>(value);
}

absl::Status ModelConfig::Validate() const {
  const std::pair<const char*, int> ints[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_layers", num_layers},
      {"num_heads", num_heads},
      {"num_kv_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [field, value] : ints) {
    if (value <= 0) return NotPositive(field, value);
  }
  if (!FinitePositive(rms_norm_eps)) return NotFinite("rms_norm_eps", rms_norm_eps);
  if (!FinitePositive(rope_theta)) return NotFinite("rope_theta", rope_theta);
  if (num_heads % num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model config: num_heads ", num_heads,
                                                   " is not a multiple of num_kv_heads ",
                                                   num_kv_heads));
  }
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: head_dim ", head_dim, " must be even for RoPE"));
  }
  if (rope_scaling.has_value()) {
    const Llama3RopeScaling& s = *rope_scaling;
    if (!FinitePositive(s.factor)) return NotFinite("rope_scaling.factor", s.factor);
    if (!FinitePositive(s.low_freq_factor)) {
      return NotFinite("rope_scaling.low_freq_factor", s.low_freq_factor);
    }
    if (!FinitePositive(s.high_freq_factor) || !(s.high_freq_factor > s.low_freq_factor)) {
      return absl::InvalidArgumentError(
          "model config: rope_scaling.high_freq_factor must be finite and exceed "
          "low_freq_factor");
    }
    if (s.original_max_position_embeddings <= 0) {
      return NotPositive("rope_scaling.original_max_position_embeddings",
                         s.original_max_position_embeddings);
    }
  }
  return absl::OkStatus();
}

}  // namespace rtgen
