#include "engine/model/model_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rtgen {

namespace {

absl::Status NotPositive(const char* field, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " must be positive, got ", value));
}

}  // namespace

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
  if (!(rms_norm_eps > 0.0f)) return NotPositive("rms_norm_eps", rms_norm_eps);
  if (!(rope_theta > 0.0f)) return NotPositive("rope_theta", rope_theta);
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
    if (!(s.factor > 0.0f)) return NotPositive("rope_scaling.factor", s.factor);
    if (!(s.low_freq_factor > 0.0f)) {
      return NotPositive("rope_scaling.low_freq_factor", s.low_freq_factor);
    }
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return absl::InvalidArgumentError(
          "model config: rope_scaling.high_freq_factor must exceed low_freq_factor");
    }
    if (s.original_max_position_embeddings <= 0) {
      return NotPositive("rope_scaling.original_max_position_embeddings",
                         s.original_max_position_embeddings);
    }
  }
  return absl::OkStatus();
}

}  // namespace rtgen
