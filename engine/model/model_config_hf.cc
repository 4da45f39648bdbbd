// ModelConfig::FromHfConfigJson: reads a Hugging Face `config.json` (LlamaForCausalLM).

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/json_nesting.h"
#include "engine/common/status_macros.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"

namespace rtgen {

namespace {

using Json = nlohmann::json;

absl::StatusOr<int> GetInt(const Json& obj, const std::string& key, std::optional<int> fallback,
                           const std::string& prefix = "") {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: missing required key '", prefix, key, "'"));
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: '", prefix, key, "' must be an integer"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: '", prefix, key, "' = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<float> GetFloat(const Json& obj, const std::string& key,
                               std::optional<float> fallback, const std::string& prefix = "") {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: missing required key '", prefix, key, "'"));
  }
  if (!it->is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: '", prefix, key, "' must be a number"));
  }
  return NarrowToFloat(it->get<double>(), absl::StrCat("config.json: '", prefix, key, "'"));
}

// RoPE scaling from `rs`, the object at config.json's `key`: rope_scaling, or transformers v5's
// rope_parameters (which holds rope_theta too).
absl::Status ReadRopeScaling(const Json& rs, const std::string& key, ModelConfig* c) {
  std::string type;
  for (const char* type_key : {"rope_type", "type"}) {
    auto t = rs.find(type_key);
    if (t == rs.end()) continue;
    if (!t->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: '", key, ".", type_key, "' must be a string"));
    }
    type = t->get<std::string>();
    break;
  }
  if (type == "default") return absl::OkStatus();
  if (type != "llama3") {
    return absl::UnimplementedError(absl::StrCat("config.json: ", key, ".rope_type '", type,
                                                 "' is not supported (want llama3 or default)"));
  }
  Llama3RopeScaling s;
  const std::string p = key + ".";
  ASSIGN_OR_RETURN(s.factor, GetFloat(rs, "factor", std::nullopt, p));
  ASSIGN_OR_RETURN(s.low_freq_factor, GetFloat(rs, "low_freq_factor", std::nullopt, p));
  ASSIGN_OR_RETURN(s.high_freq_factor, GetFloat(rs, "high_freq_factor", std::nullopt, p));
  ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                   GetInt(rs, "original_max_position_embeddings", std::nullopt, p));
  c->rope_scaling = s;
  return absl::OkStatus();
}

// Features of Llama-family configs the forward passes do not have: refused by name rather than
// run without them (bias terms left out; attention past a sliding window).
absl::Status RefuseUnsupported(const Json& root, int max_position_embeddings) {
  // The MLP is SwiGLU: SiLU (transformers' "silu", also named "swish") and nothing else.
  if (auto it = root.find("hidden_act"); it != root.end() && !it->is_null()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError("config.json: 'hidden_act' must be a string");
    }
    const std::string act = it->get<std::string>();
    if (act != "silu" && act != "swish") {
      return absl::UnimplementedError(absl::StrCat(
          "config.json: hidden_act '", act, "' is not supported (the MLP is SwiGLU: want silu)"));
    }
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    auto it = root.find(key);
    if (it != root.end() && it->is_boolean() && it->get<bool>()) {
      return absl::UnimplementedError(absl::StrCat(
          "config.json: '", key, "' true is not supported (the forward pass has no bias terms)"));
    }
  }
  auto it = root.find("sliding_window");
  if (it != root.end() && it->is_number_integer() && it->get<int64_t>() > 0 &&
      it->get<int64_t>() < max_position_embeddings) {
    return absl::UnimplementedError(absl::StrCat(
        "config.json: 'sliding_window' ", it->get<int64_t>(), " is not supported (attention "
        "covers the whole context of up to ", max_position_embeddings, " tokens)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromHfConfigJson(const std::string& json_text) {
  ASSIGN_OR_RETURN(const Json root, ParseJsonChecked(json_text, "config.json"));
  if (root.is_discarded()) return absl::InvalidArgumentError("config.json: not valid JSON");
  if (!root.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");

  ModelConfig c;
  // The model is named by model_type (what transformers' AutoConfig reads) or, where that is
  // absent, by architectures[0]; a config naming neither is refused rather than read as Llama.
  const auto type = root.find("model_type");
  const auto archs = root.find("architectures");
  if (type != root.end()) {
    if (!type->is_string()) {
      return absl::InvalidArgumentError("config.json: 'model_type' must be a string");
    }
    const std::string name = type->get<std::string>();
    if (name != "llama" && name != "mistral") {
      return absl::UnimplementedError(absl::StrCat("config.json: model_type '", name,
                                                   "' is not supported (want llama)"));
    }
  } else if (archs == root.end()) {
    return absl::InvalidArgumentError(
        "config.json: neither 'model_type' nor 'architectures' names the model (want llama)");
  }
  c.architecture = "llama";
  if (archs != root.end()) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return absl::InvalidArgumentError(
          "config.json: 'architectures' must be a non-empty list of strings");
    }
    const std::string arch = (*archs)[0].get<std::string>();
    if (arch != "LlamaForCausalLM" && arch != "MistralForCausalLM") {
      return absl::UnimplementedError(absl::StrCat(
          "config.json: architectures[0] '", arch, "' is not supported (want LlamaForCausalLM)"));
    }
  }
  if (auto it = root.find("_name_or_path"); it != root.end() && it->is_string()) {
    c.name = it->get<std::string>();
  }
  ASSIGN_OR_RETURN(c.vocab_size, GetInt(root, "vocab_size", std::nullopt));
  ASSIGN_OR_RETURN(c.hidden_size, GetInt(root, "hidden_size", std::nullopt));
  ASSIGN_OR_RETURN(c.intermediate_size, GetInt(root, "intermediate_size", std::nullopt));
  ASSIGN_OR_RETURN(c.num_layers, GetInt(root, "num_hidden_layers", std::nullopt));
  ASSIGN_OR_RETURN(c.num_heads, GetInt(root, "num_attention_heads", std::nullopt));
  if (c.num_heads <= 0) {
    return absl::InvalidArgumentError("config.json: 'num_attention_heads' must be positive");
  }
  ASSIGN_OR_RETURN(c.num_kv_heads, GetInt(root, "num_key_value_heads", c.num_heads));
  ASSIGN_OR_RETURN(c.head_dim, GetInt(root, "head_dim", c.hidden_size / c.num_heads));
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   GetInt(root, "max_position_embeddings", std::nullopt));
  ASSIGN_OR_RETURN(c.rms_norm_eps, GetFloat(root, "rms_norm_eps", 1e-6f));
  ASSIGN_OR_RETURN(c.rope_theta, GetFloat(root, "rope_theta", 10000.0f));
  if (auto it = root.find("tie_word_embeddings"); it != root.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return absl::InvalidArgumentError("config.json: 'tie_word_embeddings' must be a bool");
    }
    c.tie_word_embeddings = it->get<bool>();
  }
  // transformers v5 saves rope_theta and the scaling together as rope_parameters (and neither
  // rope_theta nor rope_scaling at the top level): read where the older keys are absent.
  const Json* rope_parameters = nullptr;
  if (auto it = root.find("rope_parameters"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError("config.json: 'rope_parameters' must be an object or null");
    }
    rope_parameters = &*it;
  }
  const auto theta = root.find("rope_theta");
  if (rope_parameters != nullptr && (theta == root.end() || theta->is_null())) {
    ASSIGN_OR_RETURN(c.rope_theta,
                     GetFloat(*rope_parameters, "rope_theta", 10000.0f, "rope_parameters."));
  }
  if (auto it = root.find("rope_scaling"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError("config.json: 'rope_scaling' must be an object or null");
    }
    RETURN_IF_ERROR(ReadRopeScaling(*it, "rope_scaling", &c));
  } else if (rope_parameters != nullptr) {
    RETURN_IF_ERROR(ReadRopeScaling(*rope_parameters, "rope_parameters", &c));
  }
  RETURN_IF_ERROR(RefuseUnsupported(root, c.max_position_embeddings));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace rtgen
