#include "engine/model/model_weights.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"

namespace rtgen {

namespace {

absl::Status CheckMatrix(const std::string& name, const Matrix& m, int64_t rows, int64_t cols) {
  if (m.rows != rows || m.cols != cols ||
      static_cast<int64_t>(m.data.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("weights: ", name, " is [", m.rows, ", ",
                                                   m.cols, "] with ", m.data.size(),
                                                   " values, want [", rows, ", ", cols, "]"));
  }
  const QuantizedRows& q = m.quantized;
  if (q.format == BlockFormat::kNone) {
    if (!q.bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights: ", name, " has quantized bytes but no block format"));
    }
    return absl::OkStatus();
  }
  const int64_t want_bytes =
      cols % kGgmlBlockSize == 0
          ? rows * (cols / kGgmlBlockSize) * static_cast<int64_t>(BlockFormatBytes(q.format))
          : -1;
  if (static_cast<int64_t>(q.bytes.size()) != want_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weights: ", name, " has ", q.bytes.size(), " bytes of ", BlockFormatName(q.format),
        " blocks, want ", want_bytes < 0 ? "cols a multiple of 32" : absl::StrCat(want_bytes)));
  }
  return absl::OkStatus();
}

absl::Status CheckVector(const std::string& name, const std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: ", name, " has ", v.size(), " values, want ", n));
  }
  return absl::OkStatus();
}

}  // namespace

void Matrix::KeepFirstRows(int64_t keep) {
  if (keep >= rows) return;
  const int64_t kept = keep < 0 ? 0 : keep;
  data.resize(static_cast<size_t>(kept * cols));
  if (quantized.format != BlockFormat::kNone) {
    quantized.bytes.resize(static_cast<size_t>(
        kept * (cols / kGgmlBlockSize) * static_cast<int64_t>(BlockFormatBytes(quantized.format))));
  }
  rows = kept;
}

void ModelWeights::KeepVocab(int64_t vocab) {
  token_embedding.KeepFirstRows(vocab);
  lm_head.KeepFirstRows(vocab);  // empty when tied: nothing to drop
}

size_t BlockFormatBytes(BlockFormat format) {
  switch (format) {
    case BlockFormat::kQ8_0:
      return kQ8_0BlockBytes;
    case BlockFormat::kQ4_0:
      return kQ4_0BlockBytes;
    case BlockFormat::kQ4_1:
      return kQ4_1BlockBytes;
    case BlockFormat::kNone:
      break;
  }
  return 0;
}

const char* BlockFormatName(BlockFormat format) {
  switch (format) {
    case BlockFormat::kQ8_0:
      return "q8_0";
    case BlockFormat::kQ4_0:
      return "q4_0";
    case BlockFormat::kQ4_1:
      return "q4_1";
    case BlockFormat::kNone:
      break;
  }
  return "none";
}

absl::Status ModelWeights::CheckShapes(const ModelConfig& config) const {
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(config.num_heads) * config.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(config.num_kv_heads) * config.head_dim;
  const int64_t ffn = config.intermediate_size;
  RETURN_IF_ERROR(CheckMatrix("token_embedding", token_embedding, config.vocab_size, hidden));
  if (static_cast<int>(layers.size()) != config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("weights: ", layers.size(),
                                                   " layers, want ", config.num_layers));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    const std::string p = absl::StrCat("layers[", i, "].");
    RETURN_IF_ERROR(CheckVector(p + "attn_norm", l.attn_norm, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "wq", l.wq, q_dim, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "wk", l.wk, kv_dim, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "wv", l.wv, kv_dim, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "wo", l.wo, hidden, q_dim));
    RETURN_IF_ERROR(CheckVector(p + "ffn_norm", l.ffn_norm, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "w_gate", l.w_gate, ffn, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "w_up", l.w_up, ffn, hidden));
    RETURN_IF_ERROR(CheckMatrix(p + "w_down", l.w_down, hidden, ffn));
  }
  RETURN_IF_ERROR(CheckVector("final_norm", final_norm, hidden));
  if (config.tie_word_embeddings) {
    if (!lm_head.empty()) {
      return absl::InvalidArgumentError("weights: lm_head must be empty when embeddings are tied");
    }
  } else {
    RETURN_IF_ERROR(CheckMatrix("lm_head", lm_head, config.vocab_size, hidden));
  }
  return absl::OkStatus();
}

}  // namespace rtgen
