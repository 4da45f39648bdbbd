#pragma once
// Random-weight Llama models for tests and benchmarks (rtgen-synth-model).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace rtgen {

// A named Llama shape: "smollm2-135m", "llama3.2-1b", "llama3-8b" or "tiny".
absl::StatusOr<ModelConfig> SyntheticShape(const std::string& name);
// "f32", "f16", "bf16", "q8_0", "q4_0" or "q4_1".
absl::StatusOr<GgmlType> ParseGgmlDtype(const std::string& name);

struct SyntheticModelOptions {
  ModelConfig config;
  GgmlType dtype = GgmlType::kF32;
  uint64_t seed = 0;
  // When set, its `tokenizer.*` metadata is copied and config.vocab_size becomes its
  // vocabulary size (the name "synthetic-custom" where that changes it: the shape's name no
  // longer describes the file). Must outlive the writer's WriteFile.
  const GgufFile* tokenizer_from = nullptr;
};

// The value a synthetic weight takes: matrices mean 0, standard deviation 0.02 (a centred sum of
// four uniforms, bounded at +-0.069), norm weights 1 plus the same. Deterministic in (seed,
// tensor name), independent of the order tensors are produced in, and the same bits on every
// platform: integer hashes (FNV-1a of the name, SplitMix64 of a counter), one rounding to float.
std::vector<float> SyntheticTensor(uint64_t seed, const std::string& name, int64_t n,
                                   bool is_norm);

// Adds metadata and lazily generated tensors; write with writer->WriteFile. Returns the config
// written (options.config with the tokenizer's vocabulary and name, where one is given).
absl::StatusOr<ModelConfig> BuildSyntheticGguf(const SyntheticModelOptions& options,
                                               GgufWriter* writer);

}  // namespace rtgen
