#include "kernels/device_weights.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/rope_inv_freq.h"

namespace rtgen {
namespace {

// fp32 -> bf16, round to nearest even (the same rounding as __float2bfloat16).
uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

absl::Status CheckMatrix(const Matrix& m, int64_t rows, int64_t cols, const std::string& name) {
  if (m.rows != rows || m.cols != cols || static_cast<int64_t>(m.data.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, " is [", m.rows, ", ", m.cols,
                                                   "] with ", m.data.size(),
                                                   " values; expected [", rows, ", ", cols, "]"));
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

absl::Status CheckShapes(const ModelConfig& c, const ModelWeights& w) {
  RETURN_IF_ERROR(CheckDeviceConfig(c));
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

// Stacks the rows of `parts` as bf16 into one device buffer, releasing each fp32 part.
absl::StatusOr<DeviceBuffer> UploadBf16(std::initializer_list<Matrix*> parts) {
  size_t n = 0;
  for (const Matrix* m : parts) n += m->data.size();
  std::vector<uint16_t> host(n);
  size_t at = 0;
  for (Matrix* m : parts) {
    for (float v : m->data) host[at++] = ToBf16(v);
    *m = Matrix();
  }
  ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Allocate(n * sizeof(uint16_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buf.get(), host.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
  return buf;
}

absl::StatusOr<DeviceBuffer> UploadF32(const std::vector<float>& v) {
  ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Allocate(v.size() * sizeof(float)));
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buf.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return buf;
}

}  // namespace

absl::StatusOr<DeviceWeights> UploadWeights(const ModelConfig& config, ModelWeights weights) {
  RETURN_IF_ERROR(CheckShapes(config, weights));
  DeviceWeights d;
  d.layers.reserve(config.num_layers);
  for (LayerWeights& l : weights.layers) {
    DeviceLayer out;
    ASSIGN_OR_RETURN(out.attn_norm, UploadF32(l.attn_norm));
    ASSIGN_OR_RETURN(out.ffn_norm, UploadF32(l.ffn_norm));
    ASSIGN_OR_RETURN(out.wqkv, UploadBf16({&l.wq, &l.wk, &l.wv}));
    ASSIGN_OR_RETURN(out.wo, UploadBf16({&l.wo}));
    ASSIGN_OR_RETURN(out.w_gate_up, UploadBf16({&l.w_gate, &l.w_up}));
    ASSIGN_OR_RETURN(out.w_down, UploadBf16({&l.w_down}));
    l = LayerWeights();
    for (const DeviceBuffer* b :
         {&out.attn_norm, &out.ffn_norm, &out.wqkv, &out.wo, &out.w_gate_up, &out.w_down}) {
      d.bytes += static_cast<int64_t>(b->bytes());
    }
    d.layers.push_back(std::move(out));
  }
  const bool tied = weights.lm_head.empty();
  ASSIGN_OR_RETURN(d.embedding, UploadBf16({&weights.token_embedding}));
  if (!tied) {
    ASSIGN_OR_RETURN(d.lm_head, UploadBf16({&weights.lm_head}));
  }
  ASSIGN_OR_RETURN(d.final_norm, UploadF32(weights.final_norm));
  ASSIGN_OR_RETURN(d.inv_freq, UploadF32(kernels::RopeInvFreq(config)));
  d.bytes += static_cast<int64_t>(d.embedding.bytes() + d.lm_head.bytes() +
                                  d.final_norm.bytes() + d.inv_freq.bytes());
  return d;
}

}  // namespace rtgen
