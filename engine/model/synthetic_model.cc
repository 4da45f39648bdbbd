#include "engine/model/synthetic_model.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf_model_writer.h"

namespace rtgen {

absl::StatusOr<ModelConfig> SyntheticShape(const std::string& name) {
  ModelConfig c;
  c.name = "synthetic-" + name;
  c.rms_norm_eps = 1e-5f;
  if (name == "smollm2-135m") {
    c.vocab_size = 49152;
    c.hidden_size = 576;
    c.intermediate_size = 1536;
    c.num_layers = 30;
    c.num_heads = 9;
    c.num_kv_heads = 3;
    c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0f;
    c.tie_word_embeddings = true;
  } else if (name == "llama3.2-1b") {
    c.vocab_size = 128256;
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_layers = 16;
    c.num_heads = 32;
    c.num_kv_heads = 8;
    c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0f;
    c.tie_word_embeddings = true;
    c.rope_scaling = Llama3RopeScaling{32.0f, 1.0f, 4.0f, 8192};
  } else if (name == "llama3-8b") {
    c.vocab_size = 128256;
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_layers = 32;
    c.num_heads = 32;
    c.num_kv_heads = 8;
    c.max_position_embeddings = 8192;
    c.rope_theta = 500000.0f;
    c.tie_word_embeddings = false;
  } else if (name == "tiny") {
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.max_position_embeddings = 2048;
    c.rope_theta = 10000.0f;
    c.tie_word_embeddings = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown shape '", name, "' (want smollm2-135m, llama3.2-1b, llama3-8b or tiny)"));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  return c;
}

absl::StatusOr<GgmlType> ParseGgmlDtype(const std::string& name) {
  if (name == "f32") return GgmlType::kF32;
  if (name == "f16") return GgmlType::kF16;
  if (name == "bf16") return GgmlType::kBF16;
  if (name == "q8_0") return GgmlType::kQ8_0;
  if (name == "q4_0") return GgmlType::kQ4_0;
  if (name == "q4_1") return GgmlType::kQ4_1;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (want f32, f16, bf16, q8_0, q4_0 or q4_1)"));
}

namespace {

// FNV-1a, 64-bit: the tensor name's part of the stream key.
uint64_t Fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// SplitMix64's output function: a counter in, 64 well-mixed bits out.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The sum of four 24-bit uniforms, centred: Irwin-Hall, variance 4 * 2^48 / 12 (in units of
// 2^-24), bounded at +-2^25. Integers only, so every platform gets the same value.
int64_t CentredIrwinHall4(uint64_t key, uint64_t index) {
  int64_t sum = 0;
  for (uint64_t j = 0; j < 4; ++j) {
    sum += static_cast<int64_t>(SplitMix64(key + 4 * index + j) >> 40);
  }
  return sum - (int64_t{1} << 25);
}

}  // namespace

std::vector<float> SyntheticTensor(uint64_t seed, const std::string& name, int64_t n,
                                   bool is_norm) {
  // Standard deviation 0.02: sqrt(3) * 0.02 / 2^24 per unit of CentredIrwinHall4 (its standard
  // deviation is 2^24 / sqrt(3)). One double product, rounded once to float.
  constexpr double kScale = 0.034641016151377546 / 16777216.0;
  const uint64_t key = SplitMix64(seed) ^ Fnv1a64(name);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(
        static_cast<double>(CentredIrwinHall4(key, static_cast<uint64_t>(i))) * kScale);
    out[i] = is_norm ? 1.0f + x : x;
  }
  return out;
}

absl::StatusOr<ModelConfig> BuildSyntheticGguf(const SyntheticModelOptions& options,
                                               GgufWriter* writer) {
  ModelConfig config = options.config;
  if (options.tokenizer_from != nullptr) {
    ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                     options.tokenizer_from->GetStringArray("tokenizer.ggml.tokens"));
    if (static_cast<int64_t>(tokens.size()) != config.vocab_size) {
      config.vocab_size = static_cast<int>(tokens.size());
      config.name = "synthetic-custom";
    }
  }
  RETURN_IF_ERROR(config.Validate());
  AddLlamaMetadata(config, writer);
  if (options.tokenizer_from != nullptr) {
    CopyTokenizerMetadata(*options.tokenizer_from, writer);
  }
  const uint64_t seed = options.seed;
  WeightSource source = [seed](const std::string& name, int64_t rows, int64_t cols) {
    return SyntheticTensor(seed, name, rows * cols, absl::EndsWith(name, "norm.weight"));
  };
  RETURN_IF_ERROR(AddLlamaTensors(config, options.dtype, std::move(source), writer));
  return config;
}

}  // namespace rtgen
