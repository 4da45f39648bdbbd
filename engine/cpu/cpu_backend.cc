#include "engine/cpu/cpu_backend.h"

#include <cstdint>
#include <exception>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/cpu/rope.h"

namespace rtgen {
namespace {

// The shared checks of the model layer: config fields, then every tensor's shape.
absl::Status CheckModel(const ModelConfig& c, const ModelWeights& w) {
  RETURN_IF_ERROR(c.Validate());
  return w.CheckShapes(c);
}

// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read.
int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
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
  // The layout is the backend's only once its buffers exist: a refused call leaves the cache it
  // had (the checks of later steps go by kv_layout_).
  const PagedKvLayout layout = {shape.num_blocks, shape.block_size, config_.num_kv_heads,
                           config_.head_dim};
  // K and V, every layer, fp32. Refused before touching it when the machine lacks the memory:
  // the buffers are zero-filled, so an overcommitted pool would bring in the OOM killer. The
  // size in doubles first: in size_t it could wrap to a small buffer that passed the check.
  const double floats = static_cast<double>(shape.num_blocks) * shape.block_size *
                        static_cast<double>(layout.slot_stride());
  const double bytes = 2.0 * config_.num_layers * floats * sizeof(float);
  const auto too_large = [&](const std::string& why) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "num_kv_blocks: %d blocks of %d tokens need %.2f GiB of KV cache, %s; lower "
        "--num-kv-blocks (or --max-num-seqs / --max-model-len when it is 0)",
        shape.num_blocks, shape.block_size, bytes / (1 << 30), why));
  };
  if (bytes > static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return too_large("more than 64-bit sizes can address");
  }
  if (const int64_t available = AvailableMemoryBytes();
      available >= 0 && bytes > static_cast<double>(available)) {
    return too_large(absl::StrFormat("more than the %.2f GiB available",
                                     static_cast<double>(available) / (1 << 30)));
  }
  const size_t n = static_cast<size_t>(shape.num_blocks) * shape.block_size *
                   layout.slot_stride();  // fits: bytes above is at most 2^63
  try {
    k_cache_.assign(config_.num_layers, KvBuffer(n, 0.0f));
    v_cache_.assign(config_.num_layers, KvBuffer(n, 0.0f));
  } catch (const std::bad_alloc&) {
    k_cache_.clear();  // half-replaced: no cache at all, which every later step refuses
    v_cache_.clear();
    return too_large("which could not be allocated");
  }
  kv_layout_ = layout;
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
  // The thread pool rethrows a body's exception (std::bad_alloc under memory pressure) once
  // every chunk is done: here it becomes this step's error, which fails the step's requests
  // and counts toward the server's health, instead of ending the engine's thread (terminate).
  try {
    return ExecuteOrThrow(input);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("cpu backend: out of memory during a step");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cpu backend: a step threw: ", e.what()));
  }
}

absl::StatusOr<StepOutput> CpuBackend::ExecuteOrThrow(const StepInput& input) {
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
