#pragma once
// Shape and numerics of a Llama-family decoder (SmolLM2, Llama 2/3, TinyLlama, Mistral-style).

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rtgen {

class GgufFile;

// Llama-3 style frequency-dependent RoPE scaling ("rope_type": "llama3").
struct Llama3RopeScaling {
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  int vocab_size = 0;
  int hidden_size = 0;         // d_model
  int intermediate_size = 0;   // SwiGLU inner width
  int num_layers = 0;
  int num_heads = 0;           // query heads
  int num_kv_heads = 0;        // key/value heads (GQA: num_heads % num_kv_heads == 0)
  int head_dim = 0;            // usually hidden_size / num_heads
  int max_position_embeddings = 0;  // trained context length, in tokens
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  std::optional<Llama3RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;  // LM head reuses the token embedding

  // Checks every field is positive and the head arithmetic is consistent; names the bad field.
  absl::Status Validate() const;

  // Reads `<arch>.*` metadata of a GGUF file.
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
  // Reads a Hugging Face `config.json` (LlamaForCausalLM and compatible).
  static absl::StatusOr<ModelConfig> FromHfConfigJson(const std::string& json_text);
};

// `value` as a float, or an error naming `field` when it is NaN, infinite or past float's range
// (a double past float's range converted by a cast is undefined behaviour).
absl::StatusOr<float> NarrowToFloat(double value, const std::string& field);

}  // namespace rtgen
