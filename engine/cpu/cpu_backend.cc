#include "engine/cpu/cpu_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/cpu/rope.h"

namespace rtgen {
namespace {

absl::Status CheckMatrix(const Matrix& m, int64_t rows, int64_t cols, const std::string& name) {
  if (m.rows != rows || m.cols != cols || static_cast<int64_t>(m.data.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, " is [", m.rows, ", ", m.cols,
                                                   "] with ", m.data.size(), " values; expected [",
                                                   rows, ", ", cols, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckVector(const std::vector<float>& v, int64_t n, const std::string& name) {
  if (static_cast<int64_t>(v.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", name, " has ", v.size(), " values; expected ", n));
  }
  return absl::OkStatus();
}

// The shapes the forward pass indexes by (so a bad model fails here, not out of bounds).
absl::Status CheckModel(const ModelConfig& c, const ModelWeights& w) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 || c.head_dim % 2 != 0 ||
      c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config is not a valid Llama shape (vocab ", c.vocab_size, ", hidden ",
        c.hidden_size, ", ffn ", c.intermediate_size, ", layers ", c.num_layers, ", heads ",
        c.num_heads, ", kv heads ", c.num_kv_heads, ", head_dim ", c.head_dim, ")"));
  }
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim, f = c.intermediate_size;
  RETURN_IF_ERROR(CheckMatrix(w.token_embedding, c.vocab_size, h, "token_embedding"));
  if (!w.lm_head.empty()) RETURN_IF_ERROR(CheckMatrix(w.lm_head, c.vocab_size, h, "lm_head"));
  RETURN_IF_ERROR(CheckVector(w.final_norm, h, "final_norm"));
  if (static_cast<int>(w.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("weights have ", w.layers.size(),
                                                   " layers; config says ", c.num_layers));
  }
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = absl::StrCat("layers.", i, ".");
    RETURN_IF_ERROR(CheckVector(l.attn_norm, h, p + "attn_norm"));
    RETURN_IF_ERROR(CheckVector(l.ffn_norm, h, p + "ffn_norm"));
    RETURN_IF_ERROR(CheckMatrix(l.wq, q, h, p + "wq"));
    RETURN_IF_ERROR(CheckMatrix(l.wk, kv, h, p + "wk"));
    RETURN_IF_ERROR(CheckMatrix(l.wv, kv, h, p + "wv"));
    RETURN_IF_ERROR(CheckMatrix(l.wo, h, q, p + "wo"));
    RETURN_IF_ERROR(CheckMatrix(l.w_gate, f, h, p + "w_gate"));
    RETURN_IF_ERROR(CheckMatrix(l.w_up, f, h, p + "w_up"));
    RETURN_IF_ERROR(CheckMatrix(l.w_down, h, f, p + "w_down"));
  }
  return absl::OkStatus();
}

}  // namespace

CpuBackend::CpuBackend(const ModelConfig& config, const CpuBackendOptions& options)
    : config_(config), options_(options), pool_(options.num_threads) {}

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const ModelConfig& config,
                                                               ModelWeights weights,
                                                               const CpuBackendOptions& options) {
  RETURN_IF_ERROR(CheckModel(config, weights));
  std::unique_ptr<CpuBackend> b(new CpuBackend(config, options));
  const WeightDtype dtype = options.weight_dtype;
  b->layers_.reserve(config.num_layers);
  for (LayerWeights& l : weights.layers) {
    Layer out;
    out.attn_norm = std::move(l.attn_norm);
    out.ffn_norm = std::move(l.ffn_norm);
    const Matrix* qkv[] = {&l.wq, &l.wk, &l.wv};
    out.wqkv = PackedMatrix::FromRows(qkv, dtype);
    out.wo = PackedMatrix::From(l.wo, dtype);
    const Matrix* gate_up[] = {&l.w_gate, &l.w_up};
    out.w_gate_up = PackedMatrix::FromRows(gate_up, dtype);
    out.w_down = PackedMatrix::From(l.w_down, dtype);
    l = LayerWeights();  // release the fp32 copy as we go
    b->layers_.push_back(std::move(out));
  }
  b->embedding_ = PackedMatrix::From(weights.token_embedding, dtype);
  b->tied_ = weights.lm_head.empty();
  if (!b->tied_) b->lm_head_ = PackedMatrix::From(weights.lm_head, dtype);
  b->final_norm_ = std::move(weights.final_norm);
  b->inv_freq_ = ComputeRopeInvFreq(config);
  return b;
}

int64_t CpuBackend::KvBytesPerBlock(int32_t block_size) const {
  return int64_t{2} * config_.num_layers * block_size * config_.num_kv_heads * config_.head_dim *
         static_cast<int64_t>(sizeof(float));
}

absl::Status CpuBackend::AllocateKvCache(const KvCacheShape& shape) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache shape must be positive, got ",
                                                   shape.num_blocks, " blocks of ",
                                                   shape.block_size, " tokens"));
  }
  kv_layout_ = {shape.num_blocks, shape.block_size, config_.num_kv_heads, config_.head_dim};
  const size_t n = static_cast<size_t>(shape.num_blocks) * shape.block_size *
                   kv_layout_.slot_stride();
  k_cache_.assign(config_.num_layers, KvBuffer(n, 0.0f));
  v_cache_.assign(config_.num_layers, KvBuffer(n, 0.0f));
  return absl::OkStatus();
}

int64_t CpuBackend::WeightBytesPerToken() const {
  int64_t bytes = output_matrix().bytes();
  for (const Layer& l : layers_) {
    bytes += l.wqkv.bytes() + l.wo.bytes() + l.w_gate_up.bytes() + l.w_down.bytes();
  }
  return bytes;
}

absl::StatusOr<StepOutput> CpuBackend::Execute(const StepInput& input) {
  for (size_t i = 0; i < input.samples.size(); ++i) {
    if (input.samples[i].params == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("step samples[", i, "].params is null"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<float> logits, ComputeLogits(input));
  StepOutput out;
  out.sampled.reserve(input.samples.size());
  const size_t vocab = config_.vocab_size;
  for (size_t i = 0; i < input.samples.size(); ++i) {
    const SampleRequest& s = input.samples[i];
    std::span<float> row(logits.data() + i * vocab, vocab);
    out.sampled.push_back(SampleToken(row, *s.params, s.prompt, s.output, s.seed));
  }
  return out;
}

}  // namespace rtgen
