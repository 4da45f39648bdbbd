#pragma once
// Writes a Llama model (config + weights) into a GgufWriter with llama.cpp's names and
// conventions: `llama.*` metadata, GGUF dims [in, out] for linear layers, wq/wk rows permuted
// for interleaved RoPE, norms kept in F32, `rope_freqs.weight` for Llama-3 rope scaling.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace rtgen {

// `general.*` and `llama.*` keys for `config`.
void AddLlamaMetadata(const ModelConfig& config, GgufWriter* writer);
// Copies every `tokenizer.*` key of `source` into `writer`; returns how many were copied.
int CopyTokenizerMetadata(const GgufFile& source, GgufWriter* writer);

// Produces the fp32 data of one weight in Hugging Face layout (row-major [rows][cols] for
// matrices), called when the file is written. `name` is the llama.cpp tensor name.
using WeightSource = std::function<std::vector<float>(const std::string& name, int64_t rows,
                                                      int64_t cols)>;

// Adds every tensor of a `config`-shaped model. Matrices use `dtype` (F32 when their row
// length is not a multiple of the block size); 1-D tensors are always F32.
absl::Status AddLlamaTensors(const ModelConfig& config, GgmlType dtype, WeightSource source,
                             GgufWriter* writer);

// Adds `weights` (which must outlive `writer`'s WriteFile/Serialize) as tensors.
absl::Status AddLlamaWeights(const ModelConfig& config, const ModelWeights& weights,
                             GgmlType dtype, GgufWriter* writer);

}  // namespace rtgen
