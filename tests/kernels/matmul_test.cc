// cuBLASLt matmul and the small-batch GEMV against an fp64 reference on bf16 inputs.

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct MatmulCase {
  int m, n, k;
};

class MatmulTest : public ::testing::TestWithParam<std::tuple<MatmulCase, bool, bool>> {};

TEST_P(MatmulTest, MatchesReference) {
  const auto [shape, use_gemv, f32_out] = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * shape.m * shape.k, 1.0f, rng));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * shape.n * shape.k, 0.05f, rng));
  auto ctx = kernels::MatmulContext::Create(use_gemv);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  DeviceArray<uint16_t> d_x(x), d_w(w);
  DeviceArray<float> d_yf(size_t{1} * shape.m * shape.n);
  DeviceArray<uint16_t> d_yb(size_t{1} * shape.m * shape.n);
  void* y = f32_out ? static_cast<void*>(d_yf.get()) : static_cast<void*>(d_yb.get());
  const absl::Status st = kernels::Matmul(
      **ctx, {d_x.bf16(), d_w.bf16(), y, f32_out, shape.m, shape.n, shape.k}, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  const std::vector<float> out = f32_out ? d_yf.ToHost() : FromBf16(d_yb.ToHost());
  std::vector<double> want(out.size());
  for (int i = 0; i < shape.m; ++i) {
    for (int j = 0; j < shape.n; ++j) {
      double acc = 0.0;
      for (int kk = 0; kk < shape.k; ++kk) {
        acc += double{FromBf16(x[size_t{1} * i * shape.k + kk])} *
               FromBf16(w[size_t{1} * j * shape.k + kk]);
      }
      want[size_t{1} * i * shape.n + j] = acc;
    }
  }
  // fp32 accumulation of bf16 products: fp32 output far under 1e-3; bf16 output ~ 2^-9.
  EXPECT_LE(RelL2(out, want), f32_out ? 1e-4 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Combine(::testing::Values(MatmulCase{1, 576, 576}, MatmulCase{3, 1728, 576},
                                         MatmulCase{8, 576, 1536}, MatmulCase{17, 3072, 576},
                                         MatmulCase{64, 2048, 2048}, MatmulCase{5, 4000, 200},
                                         MatmulCase{2, 130, 37}),
                       ::testing::Bool(), ::testing::Bool()));

}  // namespace
}  // namespace rtgen::testing_gpu
