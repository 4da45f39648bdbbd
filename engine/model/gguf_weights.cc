// LoadGgufWeights: llama.cpp tensor names -> ModelWeights (fp32, Hugging Face layout).

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_weights.h"
#include "engine/model/rope_permute.h"
#include "engine/model/tensor_names.h"

namespace rtgen {

namespace {

// Reads a GGUF tensor that must have exactly `want` dims (GGUF order: dims[0] = row length).
absl::StatusOr<std::vector<float>> ReadExact(const GgufFile& file, const std::string& name,
                                             const std::vector<int64_t>& want) {
  const GgufTensorInfo* info = file.FindTensor(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("gguf: missing tensor '", name, "'"));
  }
  if (info->dims != want) {
    std::string got, expect;
    for (int64_t d : info->dims) absl::StrAppend(&got, got.empty() ? "" : ", ", d);
    for (int64_t d : want) absl::StrAppend(&expect, expect.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", name, "' has dims [", got,
                                                   "], want [", expect, "]"));
  }
  return file.ReadTensorF32(*info);
}

BlockFormat BlockFormatOf(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
      return BlockFormat::kQ8_0;
    case GgmlType::kQ4_0:
      return BlockFormat::kQ4_0;
    case GgmlType::kQ4_1:
      return BlockFormat::kQ4_1;
    default:
      return BlockFormat::kNone;
  }
}

// A linear layer of `rows` out-features by `cols` in-features: GGUF dims [cols, rows]. A matrix
// stored in a block format keeps its blocks too (see Matrix::quantized).
absl::StatusOr<Matrix> ReadMatrix(const GgufFile& file, const std::string& name, int64_t rows,
                                  int64_t cols) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  ASSIGN_OR_RETURN(m.data, ReadExact(file, name, {cols, rows}));
  const GgufTensorInfo& info = *file.FindTensor(name);  // ReadExact found it
  const BlockFormat format = BlockFormatOf(info.type);
  if (format != BlockFormat::kNone && cols % kGgmlBlockSize == 0) {
    ASSIGN_OR_RETURN(std::span<const uint8_t> stored, file.TensorBytes(info));
    m.quantized.format = format;
    m.quantized.bytes.assign(stored.begin(), stored.end());
  }
  return m;
}

absl::StatusOr<std::vector<float>> ReadVector(const GgufFile& file, const std::string& name,
                                              int64_t n) {
  return ReadExact(file, name, {n});
}

}  // namespace

absl::StatusOr<ModelWeights> LoadGgufWeights(const GgufFile& file, const ModelConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  // Every tensor one the model reads (no biases, no layers past the count): tensor_names.h.
  for (const GgufTensorInfo& t : file.tensors()) {
    RETURN_IF_ERROR(CheckTensorIsUsed(GgufLlamaTensorNames(), config.num_layers, t.name));
  }
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(config.num_heads) * config.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(config.num_kv_heads) * config.head_dim;
  const int64_t ffn = config.intermediate_size;
  ModelWeights w;
  ASSIGN_OR_RETURN(w.token_embedding,
                   ReadMatrix(file, "token_embd.weight", config.vocab_size, hidden));
  // Layer by layer, not resized to num_layers first: a file whose layer count is corrupt
  // (billions) is then refused at its first missing tensor instead of exhausting memory.
  for (int i = 0; i < config.num_layers; ++i) {
    LayerWeights& l = w.layers.emplace_back();
    const std::string p = absl::StrCat("blk.", i, ".");
    ASSIGN_OR_RETURN(l.attn_norm, ReadVector(file, p + "attn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.wq, ReadMatrix(file, p + "attn_q.weight", q_dim, hidden));
    ASSIGN_OR_RETURN(l.wk, ReadMatrix(file, p + "attn_k.weight", kv_dim, hidden));
    ASSIGN_OR_RETURN(l.wv, ReadMatrix(file, p + "attn_v.weight", kv_dim, hidden));
    ASSIGN_OR_RETURN(l.wo, ReadMatrix(file, p + "attn_output.weight", hidden, q_dim));
    ASSIGN_OR_RETURN(l.ffn_norm, ReadVector(file, p + "ffn_norm.weight", hidden));
    ASSIGN_OR_RETURN(l.w_gate, ReadMatrix(file, p + "ffn_gate.weight", ffn, hidden));
    ASSIGN_OR_RETURN(l.w_up, ReadMatrix(file, p + "ffn_up.weight", ffn, hidden));
    ASSIGN_OR_RETURN(l.w_down, ReadMatrix(file, p + "ffn_down.weight", hidden, ffn));
    // Undo the converter's interleaved-RoPE row order (see rope_permute.h).
    RETURN_IF_ERROR(UnpermuteGgufQk(config.num_heads, config.head_dim, &l.wq));
    RETURN_IF_ERROR(UnpermuteGgufQk(config.num_kv_heads, config.head_dim, &l.wk));
  }
  ASSIGN_OR_RETURN(w.final_norm, ReadVector(file, "output_norm.weight", hidden));
  if (!config.tie_word_embeddings) {
    ASSIGN_OR_RETURN(w.lm_head, ReadMatrix(file, "output.weight", config.vocab_size, hidden));
  }
  RETURN_IF_ERROR(w.CheckShapes(config));
  return w;
}

}  // namespace rtgen
