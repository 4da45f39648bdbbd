#include "engine/model/gguf_model_writer.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/gguf_types.h"
#include "engine/model/llama3_rope.h"
#include "engine/model/rope_permute.h"

namespace rtgen {

void AddLlamaMetadata(const ModelConfig& c, GgufWriter* w) {
  w->AddString("general.architecture", "llama");
  if (!c.name.empty()) w->AddString("general.name", c.name);
  w->AddUint32("llama.block_count", c.num_layers);
  w->AddUint32("llama.context_length", c.max_position_embeddings);
  w->AddUint32("llama.embedding_length", c.hidden_size);
  w->AddUint32("llama.feed_forward_length", c.intermediate_size);
  w->AddUint32("llama.attention.head_count", c.num_heads);
  w->AddUint32("llama.attention.head_count_kv", c.num_kv_heads);
  w->AddFloat32("llama.rope.freq_base", c.rope_theta);
  w->AddFloat32("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w->AddUint32("llama.vocab_size", c.vocab_size);
  w->AddUint32("llama.rope.dimension_count", c.head_dim);
  // llama.cpp takes a head's width from these (n_embd / n_head where they are absent).
  w->AddUint32("llama.attention.key_length", c.head_dim);
  w->AddUint32("llama.attention.value_length", c.head_dim);
}

int CopyTokenizerMetadata(const GgufFile& source, GgufWriter* w) {
  int n = 0;
  for (const auto& [key, value] : source.metadata()) {
    if (absl::StartsWith(key, "tokenizer.")) {
      w->AddValue(key, value);
      ++n;
    }
  }
  return n;
}

namespace {

GgmlType MatrixType(GgmlType dtype, int64_t cols) {
  const GgmlTypeTraits t = GetGgmlTypeTraits(static_cast<uint32_t>(dtype));
  return cols % t.block_size == 0 ? dtype : GgmlType::kF32;
}

}  // namespace

absl::Status AddLlamaTensors(const ModelConfig& c, GgmlType dtype, WeightSource source,
                             GgufWriter* w) {
  RETURN_IF_ERROR(c.Validate());
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  const int64_t ffn = c.intermediate_size;
  // permute_heads > 0: reorder rows for interleaved RoPE with that many heads.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, int permute_heads) {
    const int head_dim = c.head_dim;
    return w->AddTensorLazy(
        name, {cols, rows}, MatrixType(dtype, cols),
        [source, name, rows, cols, permute_heads, head_dim]() -> std::vector<float> {
          Matrix m{rows, cols, source(name, rows, cols), {}};
          // Cannot fail: rows == permute_heads * head_dim by construction of the config.
          if (permute_heads > 0) PermuteHfQk(permute_heads, head_dim, &m).IgnoreError();
          return std::move(m.data);
        });
  };
  auto vec = [&](const std::string& name, int64_t n) {
    return w->AddTensorLazy(name, {n}, GgmlType::kF32,
                            [source, name, n]() { return source(name, 1, n); });
  };
  RETURN_IF_ERROR(matrix("token_embd.weight", c.vocab_size, hidden, 0));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    RETURN_IF_ERROR(vec(p + "attn_norm.weight", hidden));
    RETURN_IF_ERROR(matrix(p + "attn_q.weight", q_dim, hidden, c.num_heads));
    RETURN_IF_ERROR(matrix(p + "attn_k.weight", kv_dim, hidden, c.num_kv_heads));
    RETURN_IF_ERROR(matrix(p + "attn_v.weight", kv_dim, hidden, 0));
    RETURN_IF_ERROR(matrix(p + "attn_output.weight", hidden, q_dim, 0));
    RETURN_IF_ERROR(vec(p + "ffn_norm.weight", hidden));
    RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", ffn, hidden, 0));
    RETURN_IF_ERROR(matrix(p + "ffn_up.weight", ffn, hidden, 0));
    RETURN_IF_ERROR(matrix(p + "ffn_down.weight", hidden, ffn, 0));
  }
  RETURN_IF_ERROR(vec("output_norm.weight", hidden));
  if (!c.tie_word_embeddings) {
    RETURN_IF_ERROR(matrix("output.weight", c.vocab_size, hidden, 0));
  }
  if (c.rope_scaling.has_value()) {
    std::vector<float> factors;
    for (double f : Llama3RopeFreqFactors(*c.rope_scaling, c.head_dim, c.rope_theta)) {
      factors.push_back(static_cast<float>(f));
    }
    RETURN_IF_ERROR(w->AddTensor("rope_freqs.weight", {c.head_dim / 2}, GgmlType::kF32,
                                 factors));
  }
  return absl::OkStatus();
}

absl::Status AddLlamaWeights(const ModelConfig& c, const ModelWeights& weights, GgmlType dtype,
                             GgufWriter* w) {
  RETURN_IF_ERROR(weights.CheckShapes(c));
  const ModelWeights* wt = &weights;
  WeightSource source = [wt](const std::string& name, int64_t, int64_t) -> std::vector<float> {
    if (name == "token_embd.weight") return wt->token_embedding.data;
    if (name == "output_norm.weight") return wt->final_norm;
    if (name == "output.weight") return wt->lm_head.data;
    // blk.N.<suffix>
    const size_t dot = name.find('.', 4);
    const int layer = std::stoi(name.substr(4, dot - 4));
    const std::string suffix = name.substr(dot + 1);
    const LayerWeights& l = wt->layers[layer];
    if (suffix == "attn_norm.weight") return l.attn_norm;
    if (suffix == "attn_q.weight") return l.wq.data;
    if (suffix == "attn_k.weight") return l.wk.data;
    if (suffix == "attn_v.weight") return l.wv.data;
    if (suffix == "attn_output.weight") return l.wo.data;
    if (suffix == "ffn_norm.weight") return l.ffn_norm;
    if (suffix == "ffn_gate.weight") return l.w_gate.data;
    if (suffix == "ffn_up.weight") return l.w_up.data;
    return l.w_down.data;  // ffn_down.weight
  };
  return AddLlamaTensors(c, dtype, std::move(source), w);
}

}  // namespace rtgen
