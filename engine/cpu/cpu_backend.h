#pragma once
// The CPU backend: an fp32-activation Llama forward pass over a paged KV cache, with weights
// stored in the model file's own ggml blocks where it has them (exact, fewest bytes; the
// serving default), bf16 (half the memory traffic of fp32) or fp32 (exact). Matmuls split
// rows across a persistent thread pool and use AVX2/FMA; prefill processes several tokens per
// pass over each weight row.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/packed_matrix.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace rtgen {

struct CpuBackendOptions {
  int num_threads = 0;                            // 0: all hardware threads
  WeightDtype weight_dtype = WeightDtype::kNative;  // see packed_matrix.h
};

class CpuBackend : public Backend {
 public:
  // Converts `weights` to the storage dtype once; the fp32 originals are released.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const ModelConfig& config,
                                                            ModelWeights weights,
                                                            const CpuBackendOptions& options = {});

  std::string name() const override { return "cpu"; }
  absl::Status AllocateKvCache(const KvCacheShape& shape) override;
  int64_t KvBytesPerBlock(int32_t block_size) const override;
  absl::StatusOr<StepOutput> Execute(const StepInput& input) override;
  absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput& input) override;

  const ModelConfig& config() const { return config_; }
  const CpuBackendOptions& options() const { return options_; }
  int num_threads() const { return pool_.num_threads(); }
  // Weight bytes one decode step streams (every layer matrix plus the output matrix).
  int64_t WeightBytesPerToken() const;

 private:
  // Execute's work; Execute turns what it throws into the step's error.
  absl::StatusOr<StepOutput> ExecuteOrThrow(const StepInput& input);
  struct Layer {
    std::vector<float> attn_norm;  // [hidden]
    std::vector<float> ffn_norm;   // [hidden]
    PackedMatrix wqkv;             // [q_dim + 2 * kv_dim, hidden]: wq, wk, wv rows stacked
    PackedMatrix wo;               // [hidden, q_dim]
    PackedMatrix w_gate_up;        // [2 * intermediate, hidden]: gate rows then up rows
    PackedMatrix w_down;           // [hidden, intermediate]
  };

  CpuBackend(const ModelConfig& config, const CpuBackendOptions& options);
  absl::Status CheckStep(const StepInput& input) const;
  const PackedMatrix& output_matrix() const { return tied_ ? embedding_ : lm_head_; }

  ModelConfig config_;
  CpuBackendOptions options_;
  std::vector<Layer> layers_;
  PackedMatrix embedding_;  // [vocab, hidden]
  PackedMatrix lm_head_;    // [vocab, hidden]; empty when tied_
  bool tied_ = false;
  std::vector<float> final_norm_;
  std::vector<float> inv_freq_;  // [head_dim / 2] RoPE frequencies

  PagedKvLayout kv_layout_;
  using KvBuffer = std::vector<float, HugePageAllocator<float>>;
  std::vector<KvBuffer> k_cache_;  // per layer
  std::vector<KvBuffer> v_cache_;

  ThreadPool pool_;
};

}  // namespace rtgen
