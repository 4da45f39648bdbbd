#pragma once
// The backends the full-model GPU tests compare: a CPU backend with bf16 weights (the reference)
// and CUDA backends over the same random weights, each with its paged KV cache allocated.
// Failures are reported through gtest and give nullptr.

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "kernels/cuda_backend.h"

namespace rtgen::testing_gpu {

constexpr int32_t kTestBlockSize = 16;  // tokens per KV block in every test backend

// Over RandomWeights(c, seed), or over given weights.
std::unique_ptr<CpuBackend> MakeCpuBackend(const ModelConfig& c, uint64_t seed,
                                           int32_t num_blocks);
std::unique_ptr<CpuBackend> MakeCpuBackend(const ModelConfig& c, ModelWeights weights,
                                           int32_t num_blocks);

struct CudaTestOptions {
  bool graphs = false;
  bool persistent = false;
  int32_t num_blocks = 128;
  int32_t max_num_seqs = 16;
  std::vector<int32_t> graph_batch_sizes = {1, 2, 4, 8};
  // Prefill graphs (CudaBackendOptions): off unless a test asks, so the other tests' graph
  // backends prefill eagerly, exactly as their eager twins do.
  int32_t max_prefill_graph_tokens = 0;
  std::vector<int32_t> prefill_graph_tokens = {};
  bool mixed_prefill_graphs = true;  // with prefill graphs: multi-sequence ones too
  int32_t max_norm_link_rows = CudaBackendOptions{}.max_norm_link_rows;
  int32_t max_penalty_tokens = CudaBackendOptions{}.max_penalty_tokens;
  int32_t max_model_len = 1024;
  int32_t max_num_tokens = 512;  // tokens in one step (the engine's default)
};
std::unique_ptr<CudaBackend> MakeCudaBackend(const ModelConfig& c, uint64_t seed,
                                             const CudaTestOptions& options);
std::unique_ptr<CudaBackend> MakeCudaBackend(const ModelConfig& c, ModelWeights weights,
                                             const CudaTestOptions& options);

}  // namespace rtgen::testing_gpu
