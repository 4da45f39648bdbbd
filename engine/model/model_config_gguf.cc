// ModelConfig::FromGguf: reads `llama.*` metadata of a GGUF file.

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf_file.h"
#include "engine/model/llama3_rope.h"
#include "engine/model/model_config.h"

namespace rtgen {

namespace {

// A required positive integer that fits in int.
absl::StatusOr<int> RequiredInt(const GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(int64_t v, file.GetInt(key));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: metadata '", key, "' = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

// An optional integer: `fallback` when the key is absent, errors when present but invalid.
absl::StatusOr<int> OptionalInt(const GgufFile& file, const std::string& key, int fallback) {
  if (file.metadata().count(key) == 0) return fallback;
  return RequiredInt(file, key);
}

// An optional float: `fallback` when the key is absent; errors when present but not a number
// or not a finite 32-bit float.
absl::StatusOr<float> OptionalFloat(const GgufFile& file, const std::string& key,
                                    float fallback) {
  if (file.metadata().count(key) == 0) return fallback;
  ASSIGN_OR_RETURN(double v, file.GetFloat(key));
  return NarrowToFloat(v, absl::StrCat("gguf: metadata '", key, "'"));
}

// Recovers Llama-3 scaling from a `rope_freqs.weight` tensor: factor = the largest frequency
// factor, the other parameters Llama 3.x's (low 1, high 4, original context 8192); the result
// must reproduce the stored factors, else the file's scaling is one rtgen cannot represent.
absl::Status ReadRopeFreqs(const GgufFile& file, ModelConfig* config) {
  const GgufTensorInfo* info = file.FindTensor("rope_freqs.weight");
  if (info == nullptr) return absl::OkStatus();
  // The shape is checked before the tensor is read: one dimension of head_dim / 2 values.
  const int64_t want = config->head_dim / 2;
  if (info->dims.size() != 1 || info->dims[0] != want) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: rope_freqs.weight has dims [",
                                                   absl::StrJoin(info->dims, ", "),
                                                   "], want [head_dim/2 = ", want, "]"));
  }
  ASSIGN_OR_RETURN(std::vector<float> stored, file.ReadTensorF32(*info));
  if (stored.size() != static_cast<size_t>(want)) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: rope_freqs.weight has ", stored.size(),
                                                   " values, want head_dim/2 = ", want));
  }
  Llama3RopeScaling s;
  s.factor = 1.0f;
  for (float f : stored) s.factor = std::max(s.factor, f);
  if (config->rope_scaling.has_value()) s = *config->rope_scaling;
  const std::vector<double> expect =
      Llama3RopeFreqFactors(s, config->head_dim, config->rope_theta);
  for (size_t i = 0; i < stored.size(); ++i) {
    if (std::fabs(stored[i] - expect[i]) > 1e-3 * std::fabs(expect[i])) {
      return absl::UnimplementedError(absl::StrCat(
          "gguf: rope_freqs.weight[", i, "] = ", stored[i],
          " does not match Llama-3 rope scaling (factor ", s.factor, ", expected ", expect[i],
          ")"));
    }
  }
  if (s.factor != 1.0f) config->rope_scaling = s;
  return absl::OkStatus();
}

absl::Status ReadRopeScalingKeys(const GgufFile& file, const std::string& arch,
                                 ModelConfig* config) {
  const std::string type_key = arch + ".rope.scaling.type";
  if (file.metadata().count(type_key) == 0) {
    // Without a type, llama.cpp reads a factor as linear scaling (older converters wrote
    // `rope.scale_linear`): refused unless it is 1, never run unscaled.
    for (const char* name : {".rope.scaling.factor", ".rope.scale_linear"}) {
      const std::string key = arch + name;
      ASSIGN_OR_RETURN(float factor, OptionalFloat(file, key, 1.0f));
      if (factor != 1.0f) {
        return absl::UnimplementedError(absl::StrCat(
            "gguf: linear rope scaling (", key, " = ", factor, ", no ", type_key,
            ") is not supported"));
      }
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string type, file.GetString(type_key));
  if (type == "none") return absl::OkStatus();
  if (type != "llama3") {
    return absl::UnimplementedError(
        absl::StrCat("gguf: rope scaling type '", type, "' (", type_key, ") is not supported"));
  }
  Llama3RopeScaling s;
  ASSIGN_OR_RETURN(s.factor, OptionalFloat(file, arch + ".rope.scaling.factor", s.factor));
  ASSIGN_OR_RETURN(s.low_freq_factor, OptionalFloat(file, arch + ".rope.scaling.low_freq_factor",
                                                    s.low_freq_factor));
  ASSIGN_OR_RETURN(s.high_freq_factor,
                   OptionalFloat(file, arch + ".rope.scaling.high_freq_factor",
                                 s.high_freq_factor));
  ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                   OptionalInt(file, arch + ".rope.scaling.original_context_length",
                               s.original_max_position_embeddings));
  config->rope_scaling = s;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.GetString("general.architecture"));
  if (c.architecture != "llama") {
    return absl::UnimplementedError(absl::StrCat("gguf: general.architecture '", c.architecture,
                                                 "' is not supported (want llama)"));
  }
  const std::string p = c.architecture + ".";
  if (file.metadata().count("general.name") != 0) {
    ASSIGN_OR_RETURN(c.name, file.GetString("general.name"));
  }
  ASSIGN_OR_RETURN(c.num_layers, RequiredInt(file, p + "block_count"));
  ASSIGN_OR_RETURN(c.max_position_embeddings, RequiredInt(file, p + "context_length"));
  ASSIGN_OR_RETURN(c.hidden_size, RequiredInt(file, p + "embedding_length"));
  ASSIGN_OR_RETURN(c.intermediate_size, RequiredInt(file, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_heads, RequiredInt(file, p + "attention.head_count"));
  ASSIGN_OR_RETURN(c.num_kv_heads,
                   OptionalInt(file, p + "attention.head_count_kv", c.num_heads));
  ASSIGN_OR_RETURN(c.rope_theta, OptionalFloat(file, p + "rope.freq_base", 10000.0f));
  const std::string eps_key = p + "attention.layer_norm_rms_epsilon";
  ASSIGN_OR_RETURN(double eps, file.GetFloat(eps_key));
  ASSIGN_OR_RETURN(c.rms_norm_eps, NarrowToFloat(eps, absl::StrCat("gguf: metadata '", eps_key,
                                                                    "'")));

  if (file.metadata().count(p + "vocab_size") != 0) {
    ASSIGN_OR_RETURN(c.vocab_size, RequiredInt(file, p + "vocab_size"));
  } else {
    auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
    if (!tokens.ok()) {
      return absl::NotFoundError(absl::StrCat("gguf: neither '", p,
                                              "vocab_size' nor 'tokenizer.ggml.tokens' gives "
                                              "the vocabulary size"));
    }
    c.vocab_size = static_cast<int>(tokens->size());
  }

  // head_dim is the key length; values and the rotated part must have the same width (no
  // partial rotary embeddings, no separate value width): refused naming both keys otherwise.
  const int default_head_dim = c.hidden_size / c.num_heads;
  ASSIGN_OR_RETURN(c.head_dim, OptionalInt(file, p + "attention.key_length", default_head_dim));
  for (const char* name : {"attention.value_length", "rope.dimension_count"}) {
    ASSIGN_OR_RETURN(int width, OptionalInt(file, p + name, c.head_dim));
    if (width != c.head_dim) {
      return absl::UnimplementedError(absl::StrCat(
          "gguf: ", p, name, " = ", width, " differs from the head dimension ", c.head_dim,
          " (", p, "attention.key_length, else embedding_length / head_count): not supported"));
    }
  }

  c.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  RETURN_IF_ERROR(ReadRopeScalingKeys(file, c.architecture, &c));
  RETURN_IF_ERROR(ReadRopeFreqs(file, &c));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace rtgen
