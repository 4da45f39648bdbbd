// cuBLASLt matmul and the small-batch GEMV against an fp64 reference on bf16 inputs; the tuned
// cuBLASLt algorithm choice (one per shape per process, bitwise repeatable, heuristic under
// capture).

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct MatmulCase {
  int m, n, k;
  bool gemv = false;  // the GEMV's shape (matmul.cc GemvShape) where the context has the GEMV
};

class MatmulTest : public ::testing::TestWithParam<std::tuple<MatmulCase, bool, bool>> {};

std::vector<double> Reference(const MatmulCase& shape, const std::vector<uint16_t>& x,
                              const std::vector<uint16_t>& w) {
  return MatmulReference(x, w, shape.m, shape.n, shape.k);
}

// Random bf16 operands of a shape: x ~ N(0, 1) [m, k], w ~ N(0, 0.05) [n, k].
struct Operands {
  std::vector<uint16_t> x, w;
};

Operands RandomOperands(const MatmulCase& shape, std::mt19937_64& rng) {
  return {ToBf16(RandomNormal(size_t{1} * shape.m * shape.k, 1.0f, rng)),
          ToBf16(RandomNormal(size_t{1} * shape.n * shape.k, 0.05f, rng))};
}

// A tuning test's inputs: random operands of `shape` from a fresh seed (trace it), also on the
// device, and their fp64 product.
struct TuneCase {
  explicit TuneCase(const MatmulCase& s)
      : shape(s), seed(FreshSeed()), rng(seed), ops(RandomOperands(s, rng)), d_x(ops.x),
        d_w(ops.w), want(Reference(s, ops.x, ops.w)) {}
  kernels::MatmulParams Params(void* y, bool y_f32) const {
    return {d_x.bf16(), d_w.bf16(), y, y_f32, shape.m, shape.n, shape.k};
  }
  MatmulCase shape;
  uint64_t seed;
  std::mt19937_64 rng;
  Operands ops;
  DeviceArray<uint16_t> d_x, d_w;
  std::vector<double> want;
};

// True when a plan's info (MatmulContext::PlanInfo) says it is the heuristic's first algorithm,
// untimed (a tuned plan's info names the heuristic's first too, as what it was timed against).
bool Untuned(const std::string& info) {
  return info.find("tuned") == std::string::npos &&
         info.find("; the heuristic's first") != std::string::npos;
}

TEST_P(MatmulTest, MatchesReference) {
  const auto [shape, use_gemv, f32_out] = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const auto [x, w] = RandomOperands(shape, rng);
  auto ctx = kernels::MatmulContext::Create(use_gemv);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  DeviceArray<uint16_t> d_x(x), d_w(w);
  DeviceArray<float> d_yf(size_t{1} * shape.m * shape.n);
  DeviceArray<uint16_t> d_yb(size_t{1} * shape.m * shape.n);
  void* y = f32_out ? static_cast<void*>(d_yf.get()) : static_cast<void*>(d_yb.get());
  const kernels::MatmulParams params{d_x.bf16(), d_w.bf16(), y, f32_out, shape.m, shape.n, shape.k};
  // The route each case names: a regression to cuBLASLt everywhere met the reference as well.
  EXPECT_EQ(kernels::MatmulRunsOnCublas(**ctx, params), !(use_gemv && shape.gemv));
  const absl::Status st = kernels::Matmul(**ctx, params, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  const std::vector<float> out = f32_out ? d_yf.ToHost() : FromBf16(d_yb.ToHost());
  const std::vector<double> want = Reference(shape, x, w);
  // fp32 accumulation of bf16 products: fp32 output far under 1e-3; bf16 output ~ 2^-9.
  EXPECT_LE(RelL2(out, want), f32_out ? 1e-4 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Combine(
        ::testing::Values(
            MatmulCase{1, 576, 576, true}, MatmulCase{3, 1728, 576, true},
            MatmulCase{8, 576, 1536, true},
            // 17-48 rows: the GEMV in slices of 16 rows under 2 Mi weight elements, else not.
            MatmulCase{17, 3072, 576, true}, MatmulCase{48, 520, 264, true},
            MatmulCase{32, 1024, 4096}, MatmulCase{64, 2048, 2048}, MatmulCase{64, 1536, 3584},
            MatmulCase{5, 4000, 200, true},
            MatmulCase{2, 130, 37},  // k not a multiple of 8: cuBLASLt
            // Wide shapes (LM heads) on either side of the GEMV's 1-4 row, k <= 2048 routing
            // (matmul.cc GemvShape).
            MatmulCase{1, 20000, 576, true}, MatmulCase{4, 17000, 136, true},
            MatmulCase{5, 17000, 136}, MatmulCase{2, 16500, 2056},
            // One row of >= 24 MiB with >= 4096 features: the row-streaming GEMV, wide or not.
            MatmulCase{1, 4096, 3072, true}, MatmulCase{1, 20480, 1288, true}),
                       ::testing::Bool(), ::testing::Bool()));

// Decode-batch shapes are tuned once per process, where tuning is allowed: a second context
// (tuning not allowed) runs the same algorithm (bitwise equal outputs, also on a repeat), and the
// tuned and untuned algorithms both meet the reference.
TEST(MatmulTuneTest, SharedChoiceIsBitwiseRepeatable) {
  const TuneCase c({64, 2048, 4096});
  SCOPED_TRACE(c.seed);
  const MatmulCase& shape = c.shape;
  auto tuned_a = kernels::MatmulContext::Create(false, true);
  auto tuned_b = kernels::MatmulContext::Create(false, true);
  auto untuned = kernels::MatmulContext::Create(false, false);
  ASSERT_TRUE(tuned_a.ok() && tuned_b.ok() && untuned.ok());
  (*tuned_a)->AllowTuning(true);
  std::vector<std::vector<float>> outs;
  for (kernels::MatmulContext* ctx : {tuned_a->get(), tuned_a->get(), tuned_b->get(),
                                      untuned->get()}) {
    DeviceArray<float> y(size_t{1} * shape.m * shape.n);
    GPU_CHECK(cudaMemset(y.get(), 0xff, size_t{1} * shape.m * shape.n * sizeof(float)));
    const absl::Status st = kernels::Matmul(*ctx, c.Params(y.get(), true), nullptr);
    ASSERT_TRUE(st.ok()) << st;
    outs.push_back(y.ToHost());
    EXPECT_LE(RelL2(outs.back(), c.want), 1e-4);
  }
  const size_t bytes = outs[0].size() * sizeof(float);
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), bytes), 0) << "repeat differs";
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[2].data(), bytes), 0) << "second context differs";
  const std::string info = (*tuned_a)->PlanInfo(shape.m, shape.n, shape.k, true);
  EXPECT_NE(info.find("tuned"), std::string::npos) << info;
  EXPECT_EQ(info, (*tuned_b)->PlanInfo(shape.m, shape.n, shape.k, true));
  EXPECT_TRUE(Untuned((*untuned)->PlanInfo(shape.m, shape.n, shape.k, true)));
}

// A shape first met while its stream is captured cannot be timed: the heuristic's first
// algorithm is captured, and runs correctly on replay.
TEST(MatmulTuneTest, FirstCallUnderCaptureUsesHeuristic) {
  const TuneCase c({24, 712, 328});  // a shape used by no other test of the process
  SCOPED_TRACE(c.seed);
  const MatmulCase& shape = c.shape;
  DeviceArray<uint16_t> y(size_t{1} * shape.m * shape.n);
  auto ctx = kernels::MatmulContext::Create(false, true);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  (*ctx)->AllowTuning(true);
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status st = kernels::Matmul(**ctx, c.Params(y.get(), false), stream);
  cudaGraph_t graph = nullptr;
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st;
  cudaGraphExec_t exec = nullptr;
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CHECK(cudaMemset(y.get(), 0xff, size_t{1} * shape.m * shape.n * sizeof(uint16_t)));
  GPU_CHECK(cudaGraphLaunch(exec, stream));
  GPU_CHECK(cudaStreamSynchronize(stream));
  EXPECT_LE(RelL2(FromBf16(y.ToHost()), c.want), 1e-2);
  EXPECT_TRUE(Untuned((*ctx)->PlanInfo(shape.m, shape.n, shape.k, false)));
  GPU_CHECK(cudaGraphExecDestroy(exec));
  GPU_CHECK(cudaGraphDestroy(graph));
  GPU_CHECK(cudaStreamDestroy(stream));
}

// Where tuning is not allowed a new shape takes the heuristic's first algorithm and is not
// recorded as tuned, so a context allowed to tune still times it (the first keeps its plan).
TEST(MatmulTuneTest, NoTuningOutsideTheWindow) {
  const TuneCase c({40, 1096, 584});  // a shape used by no other test of the process
  SCOPED_TRACE(c.seed);
  const MatmulCase& shape = c.shape;
  DeviceArray<float> y(size_t{1} * shape.m * shape.n);
  auto closed = kernels::MatmulContext::Create(false, true);
  auto open = kernels::MatmulContext::Create(false, true);
  ASSERT_TRUE(closed.ok() && open.ok());
  const kernels::MatmulParams p = c.Params(y.get(), true);
  ASSERT_TRUE(kernels::Matmul(**closed, p, nullptr).ok());
  EXPECT_LE(RelL2(y.ToHost(), c.want), 1e-4);
  EXPECT_TRUE(Untuned((*closed)->PlanInfo(shape.m, shape.n, shape.k, true)));
  (*open)->AllowTuning(true);
  GPU_CHECK(cudaMemset(y.get(), 0xff, size_t{1} * shape.m * shape.n * sizeof(float)));
  ASSERT_TRUE(kernels::Matmul(**open, p, nullptr).ok());
  EXPECT_LE(RelL2(y.ToHost(), c.want), 1e-4);
  EXPECT_NE((*open)->PlanInfo(shape.m, shape.n, shape.k, true).find("tuned"), std::string::npos);
  EXPECT_TRUE(Untuned((*closed)->PlanInfo(shape.m, shape.n, shape.k, true)));
}

}  // namespace
}  // namespace rtgen::testing_gpu
