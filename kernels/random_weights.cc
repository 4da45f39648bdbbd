#include "kernels/random_weights.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/random_fill.h"
#include "kernels/rope_inv_freq.h"

namespace rtgen {
namespace {

constexpr float kMatrixStddev = 0.02f;
constexpr float kNormMean = 1.0f;
constexpr float kNormStddev = 0.1f;

// Hands out buffers filled with consecutive tensor ids, so every tensor draws its own values.
class Filler {
 public:
  explicit Filler(uint64_t seed) : seed_(seed) {}

  absl::StatusOr<DeviceBuffer> Bf16(int64_t elems) {
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(elems * sizeof(__nv_bfloat16)));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RandomFillBf16(
        b.as<__nv_bfloat16>(), elems, {seed_, next_id_++, 0.0f, kMatrixStddev}, nullptr));
    bytes_ += static_cast<int64_t>(b.bytes());
    return b;
  }

  absl::StatusOr<DeviceBuffer> NormF32(int64_t elems) {
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(elems * sizeof(float)));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RandomFillF32(
        b.as<float>(), elems, {seed_, next_id_++, kNormMean, kNormStddev}, nullptr));
    bytes_ += static_cast<int64_t>(b.bytes());
    return b;
  }

  int64_t bytes() const { return bytes_; }

 private:
  uint64_t seed_;
  uint64_t next_id_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace

absl::StatusOr<DeviceWeights> CreateRandomDeviceWeights(const ModelConfig& config,
                                                        uint64_t seed) {
  RETURN_IF_ERROR(CheckDeviceConfig(config));
  const int64_t h = config.hidden_size, f = config.intermediate_size;
  const int64_t q = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv = int64_t{config.num_kv_heads} * config.head_dim;
  Filler fill(seed);
  DeviceWeights d;
  d.layers.reserve(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    DeviceLayer l;
    ASSIGN_OR_RETURN(l.attn_norm, fill.NormF32(h));
    ASSIGN_OR_RETURN(l.ffn_norm, fill.NormF32(h));
    ASSIGN_OR_RETURN(l.wqkv, fill.Bf16((q + 2 * kv) * h));
    ASSIGN_OR_RETURN(l.wo, fill.Bf16(h * q));
    ASSIGN_OR_RETURN(l.w_gate_up, fill.Bf16(2 * f * h));
    ASSIGN_OR_RETURN(l.w_down, fill.Bf16(h * f));
    d.layers.push_back(std::move(l));
  }
  ASSIGN_OR_RETURN(d.embedding, fill.Bf16(int64_t{config.vocab_size} * h));
  if (!config.tie_word_embeddings) {
    ASSIGN_OR_RETURN(d.lm_head, fill.Bf16(int64_t{config.vocab_size} * h));
  }
  ASSIGN_OR_RETURN(d.final_norm, fill.NormF32(h));
  const std::vector<float> inv_freq = kernels::RopeInvFreq(config);
  ASSIGN_OR_RETURN(d.inv_freq, DeviceBuffer::Allocate(inv_freq.size() * sizeof(float)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.inv_freq.get(), inv_freq.data(),
                                        inv_freq.size() * sizeof(float),
                                        cudaMemcpyHostToDevice));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // fills ran on the legacy stream
  d.bytes = fill.bytes() + static_cast<int64_t>(d.inv_freq.bytes());
  return d;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithRandomWeights(
    const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options) {
  int count = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", options.device,
                                                   " does not exist (", count, " visible)"));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  ASSIGN_OR_RETURN(DeviceWeights weights, CreateRandomDeviceWeights(config, seed));
  return CudaBackend::CreateWithDeviceWeights(config, std::move(weights), options);
}

}  // namespace rtgen
