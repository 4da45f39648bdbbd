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

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace rtgen {

// A ggml block format (engine/model/ggml_dequant.h) a matrix was stored in.
enum class BlockFormat { kNone, kQ8_0, kQ4_0, kQ4_1 };

// Bytes of one 32-element block of `format` (0 for kNone).
size_t BlockFormatBytes(BlockFormat format);
const char* BlockFormatName(BlockFormat format);

// A matrix's blocks as the file stored them: row r's cols / 32 blocks at r * row_bytes.
struct QuantizedRows {
  BlockFormat format = BlockFormat::kNone;
  std::vector<uint8_t> bytes;  // rows * cols / 32 blocks; empty when format is kNone
};

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> data;  // rows * cols values
  // Set when the file stored this matrix in a block format (cols a multiple of 32). Invariant:
  // dequantising `quantized` gives `data` exactly, rows in the same order; a backend may compute
  // on the blocks directly (fewer bytes per step) with the same weights.
  QuantizedRows quantized;
  bool empty() const { return data.empty(); }
  const float* row(int64_t r) const { return data.data() + r * cols; }
  // Drops every row from `keep` on (0 <= keep <= rows): rows are row-major, so the rows kept
  // are a prefix of `data` and of `quantized` alike.
  void KeepFirstRows(int64_t keep);
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
  // The embedding's and the LM head's first `vocab` rows only (vocab <= their rows): ids from
  // `vocab` on can then be neither embedded nor sampled.
  void KeepVocab(int64_t vocab);
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
