#include "tests/kernels/test_backends.h"

#include <utility>

#include "gtest/gtest.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {

std::unique_ptr<CpuBackend> MakeCpuBackend(const ModelConfig& c, uint64_t seed,
                                           int32_t num_blocks) {
  return MakeCpuBackend(c, RandomWeights(c, seed), num_blocks);
}

std::unique_ptr<CpuBackend> MakeCpuBackend(const ModelConfig& c, ModelWeights weights,
                                           int32_t num_blocks) {
  CpuBackendOptions o;
  o.weight_dtype = WeightDtype::kBf16;
  auto b = CpuBackend::Create(c, std::move(weights), o);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return nullptr;
  const absl::Status st = (*b)->AllocateKvCache({num_blocks, kTestBlockSize});
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return nullptr;
  return std::move(*b);
}

std::unique_ptr<CudaBackend> MakeCudaBackend(const ModelConfig& c, uint64_t seed,
                                             const CudaTestOptions& options) {
  return MakeCudaBackend(c, RandomWeights(c, seed), options);
}

std::unique_ptr<CudaBackend> MakeCudaBackend(const ModelConfig& c, ModelWeights weights,
                                             const CudaTestOptions& options) {
  CudaBackendOptions o;
  o.max_num_tokens = options.max_num_tokens;
  o.max_num_seqs = options.max_num_seqs;
  o.max_model_len = options.max_model_len;
  o.enable_cuda_graphs = options.graphs;
  o.graph_batch_sizes = options.graph_batch_sizes;
  o.max_prefill_graph_tokens = options.max_prefill_graph_tokens;
  o.prefill_graph_tokens = options.prefill_graph_tokens;
  o.mixed_prefill_graphs = options.mixed_prefill_graphs;
  o.persistent_decode = options.persistent;
  o.max_norm_link_rows = options.max_norm_link_rows;
  o.max_penalty_tokens = options.max_penalty_tokens;
  auto b = CudaBackend::Create(c, std::move(weights), o);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return nullptr;
  const absl::Status st = (*b)->AllocateKvCache({options.num_blocks, kTestBlockSize});
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return nullptr;
  return std::move(*b);
}

}  // namespace rtgen::testing_gpu
