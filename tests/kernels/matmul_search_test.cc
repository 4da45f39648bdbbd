// The wide cuBLASLt search (kernels/matmul_search.h): it names more configurations of the
// heuristic's algorithm than the heuristic does, each accepted by cuBLASLt, and the ones run here
// (spread over the list) meet an fp64 reference on random bf16 operands.

#include <cublasLt.h>

#include <vector>

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "kernels/matmul_search.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

#define LT_CHECK(expr) ASSERT_EQ((expr), CUBLAS_STATUS_SUCCESS) << #expr

// Owns the cuBLASLt objects of one plan, laid out as matmul.cc lays out y[m, n] = x w^T.
struct LtPlan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

TEST(MatmulSearchTest, ConfigurationsRunAndMeetTheReference) {
  constexpr int m = 48, n = 1000, k = 1024;  // n is not a multiple of any tile
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng));
  const std::vector<double> want = MatmulReference(x, w, m, n, k);

  LtPlan plan;
  LT_CHECK(cublasLtCreate(&plan.handle));
  LT_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                          sizeof(trans_a)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                          sizeof(trans_b)));
  LT_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, n, m, n));
  constexpr size_t kWorkspace = kernels::MatmulContext::kWorkspaceBytes;

  cublasLtMatmulPreference_t pref = nullptr;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspace, sizeof(kWorkspace)));
  cublasLtMatmulHeuristicResult_t first{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
      plan.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &first, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ASSERT_EQ(heuristic, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  int32_t id = -1;
  size_t written = 0;
  LT_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&first.algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                sizeof(id), &written));

  const std::vector<cublasLtMatmulAlgo_t> algos = kernels::EnumerateMatmulAlgos(
      plan.handle, plan.desc, plan.a, plan.b, plan.c, CUDA_R_32F, {id}, kWorkspace, 3000);
  // The heuristic's algorithm in more than the handful of configurations its list names.
  ASSERT_GT(algos.size(), size_t{8}) << "algorithm " << id;
  EXPECT_LE(algos.size(), size_t{3000});
  const std::vector<cublasLtMatmulAlgo_t> capped = kernels::EnumerateMatmulAlgos(
      plan.handle, plan.desc, plan.a, plan.b, plan.c, CUDA_R_32F, {id}, kWorkspace, 5);
  EXPECT_EQ(capped.size(), size_t{5});

  DeviceArray<uint16_t> d_x(x), d_w(w);
  DeviceArray<uint8_t> workspace(kWorkspace);
  constexpr int kRuns = 12;
  const float alpha = 1.0f, beta = 0.0f;
  for (int r = 0; r < kRuns; ++r) {
    const size_t i = algos.size() == 1 ? 0 : r * (algos.size() - 1) / (kRuns - 1);
    SCOPED_TRACE(i);
    DeviceArray<float> y(size_t{1} * m * n);  // poisoned (NaN) until written
    ASSERT_EQ(cublasLtMatmul(plan.handle, plan.desc, &alpha, d_w.bf16(), plan.a, d_x.bf16(),
                             plan.b, &beta, y.get(), plan.c, y.get(), plan.c, &algos[i],
                             workspace.get(), kWorkspace, nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_LE(RelL2(y.ToHost(), want), 1e-4);
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
