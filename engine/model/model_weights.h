#pragma once
// Model weights in fp32, in Hugging Face layout, as every backend receives them.
//
// Layout invariants (every loader guarantees them, every backend relies on them):
//  - Matrix is row-major [rows][cols]; a linear layer y = W x has rows = out features,
//    cols = in features (the Hugging Face `weight` layout).
//  - wq/wk rows are in Hugging Face order: RoPE rotates pairs (i, i + head_dim/2) within a head
//    ("rotate half"). GGUF files store q/k permuted for interleaved RoPE; the GGUF loader undoes
//    that permutation on load.
//  - lm_head is empty when the config ties word embeddings; use token_embedding then.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace rtgen {

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> data;  // rows * cols values
  bool empty() const { return data.empty(); }
  const float* row(int64_t r) const { return data.data() + r * cols; }
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  Matrix wq;                     // [num_heads * head_dim, hidden]
  Matrix wk;                     // [num_kv_heads * head_dim, hidden]
  Matrix wv;                     // [num_kv_heads * head_dim, hidden]
  Matrix wo;                     // [hidden, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  Matrix w_gate;                 // [intermediate, hidden]
  Matrix w_up;                   // [intermediate, hidden]
  Matrix w_down;                 // [hidden, intermediate]
};

struct ModelWeights {
  Matrix token_embedding;        // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm; // [hidden]
  Matrix lm_head;                // [vocab, hidden]; empty when tied

  const Matrix& output_matrix() const { return lm_head.empty() ? token_embedding : lm_head; }
  // Checks every tensor has the shape `config` implies; names the first wrong tensor.
  absl::Status CheckShapes(const ModelConfig& config) const;
};

class GgufFile;
// Builds weights from a GGUF file's tensors (llama.cpp names), dequantising to fp32.
absl::StatusOr<ModelWeights> LoadGgufWeights(const GgufFile& file, const ModelConfig& config);
// Builds weights from a directory holding `*.safetensors` (HF names) for `config`.
absl::StatusOr<ModelWeights> LoadSafetensorsWeights(const std::string& dir,
                                                    const ModelConfig& config);

}  // namespace rtgen
