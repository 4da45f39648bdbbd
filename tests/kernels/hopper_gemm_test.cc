// HopperGemm (TMA + wgmma, stream-K over the SMs) against an fp64 reference on bf16 inputs: plain,
// fp32 output and the SiLU·mul epilogue, both tile widths, rows 1..64, shapes whose tiles are
// split between CTAs and shapes with partial tiles (n not a multiple of the tile, k of 64).
// Repeated launches and a graph replay are bitwise equal (the split tiles' fixed summing order,
// the tile counters reset by each launch); with RTGEN_HOPPER_GEMM=1 Matmul and MatmulSiluMul
// route 9..64 rows to it. Weights laid out by HopperTileWeights give the same bits.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "kernels/hopper_gemm.h"
#include "kernels/matmul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct GemmCase {
  int m, n, k;
  bool silu_mul, y_f32;
  int tile_n;
};

// The workspace of one stream, as MatmulContext allocates it; `ctas` below the SM count makes
// each CTA run many more iterations (the stage ring wraps many times).
class Workspace {
 public:
  explicit Workspace(int ctas = 0) {
    int device = 0;
    GPU_CHECK(cudaGetDevice(&device));
    available_ = kernels::HopperGemmAvailable(device);
    int sms = 0;
    GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    partials_ = std::make_unique<DeviceArray<float>>(kernels::HopperGemmPartialBytes(sms) / 4);
    counters_ = std::make_unique<DeviceArray<uint32_t>>(kernels::kHopperGemmMaxTiles);
    GPU_CHECK(cudaMemset(counters_->get(), 0, kernels::kHopperGemmMaxTiles * sizeof(uint32_t)));
    ws_ = {partials_->get(), counters_->get(), ctas > 0 ? ctas : sms};
  }
  bool available() const { return available_; }
  const kernels::HopperGemmWorkspace& get() const { return ws_; }

 private:
  bool available_ = false;
  std::unique_ptr<DeviceArray<float>> partials_;
  std::unique_ptr<DeviceArray<uint32_t>> counters_;
  kernels::HopperGemmWorkspace ws_{};
};

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

// y = x w^T in fp64; with silu_mul silu(gate) * up, gate and up rounded to bf16 first as the
// kernel does.
std::vector<double> Reference(const GemmCase& c, const std::vector<uint16_t>& x,
                              const std::vector<uint16_t>& w) {
  const std::vector<double> full = MatmulReference(x, w, c.m, c.n, c.k);
  if (!c.silu_mul) return full;
  const int inter = c.n / 2;
  std::vector<double> act(size_t{1} * c.m * inter);
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < inter; ++j) {
      const double g = FromBf16(ToBf16(static_cast<float>(full[size_t{1} * i * c.n + j])));
      const double u = FromBf16(ToBf16(static_cast<float>(full[size_t{1} * i * c.n + inter + j])));
      act[size_t{1} * i * inter + j] = Silu(g) * u;
    }
  }
  return act;
}

// One case's operands and output on the device. The output array is poisoned (0xff) with a
// guard of kGuard floats past the output (and past a bf16 output, the rest of the fp32 array):
// Run fails the test when a launch writes there.
class GemmRun {
 public:
  static constexpr size_t kGuard = 4096;
  // Random w; x is set by SetX before the first launch.
  GemmRun(const GemmCase& c, std::mt19937_64& rng)
      : c_(c), count_(size_t{1} * c.m * (c.silu_mul ? c.n / 2 : c.n)),
        w_(ToBf16(RandomNormal(size_t{1} * c.n * c.k, 0.05f, rng))), d_w_(w_),
        d_x_(size_t{1} * c.m * c.k), d_y_(count_ + kGuard) {}
  // New random x (on the device too); returns its fp64 reference output.
  std::vector<double> SetX(std::mt19937_64& rng) {
    x_ = ToBf16(RandomNormal(size_t{1} * c_.m * c_.k, 1.0f, rng));
    GPU_CHECK(cudaMemcpy(d_x_.get(), x_.data(), x_.size() * 2, cudaMemcpyHostToDevice));
    return Reference(c_, x_, w_);
  }
  kernels::HopperGemmParams Params() const {
    return {d_x_.bf16(), d_w_.bf16(), d_y_.get(), c_.y_f32, c_.m,
            c_.n,        c_.k,        c_.silu_mul, c_.tile_n};
  }
  void Poison(cudaStream_t stream) {
    GPU_CHECK(cudaMemsetAsync(d_y_.get(), 0xff, (count_ + kGuard) * sizeof(float), stream));
  }
  // The output once `stream` has run the launch, as floats; the guard must be untouched.
  std::vector<float> Output(cudaStream_t stream) {
    GPU_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> raw = d_y_.ToHost();
    const size_t used = c_.y_f32 ? count_ * 4 : count_ * 2;
    const auto* bytes = reinterpret_cast<const uint8_t*>(raw.data());
    size_t touched = 0;
    for (size_t i = used; i < raw.size() * 4; ++i) touched += bytes[i] != 0xff;
    EXPECT_EQ(touched, 0u) << "bytes written past the output";
    if (c_.y_f32) return {raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(count_)};
    std::vector<uint16_t> bits(count_);
    std::memcpy(bits.data(), raw.data(), count_ * sizeof(uint16_t));
    return FromBf16(bits);
  }
  std::vector<float> Launch(const kernels::HopperGemmWorkspace& ws, cudaStream_t stream) {
    Poison(stream);
    GPU_CHECK(kernels::HopperGemm(Params(), ws, stream));
    return Output(stream);
  }
  // The same launch from w laid out by HopperTileWeights (w itself not passed: null).
  std::vector<float> LaunchTiled(const kernels::HopperGemmWorkspace& ws, cudaStream_t stream) {
    DeviceArray<uint16_t> tiled(  // poisoned: every element is rewritten
        kernels::HopperTiledWeightElems(c_.n, c_.k, c_.tile_n, c_.silu_mul));
    GPU_CHECK(kernels::HopperTileWeights(d_w_.bf16(), c_.n, c_.k, c_.tile_n, c_.silu_mul,
                                         tiled.bf16(), stream));
    kernels::HopperGemmParams p = Params();
    p.w = nullptr;
    p.w_tiled = tiled.bf16();
    Poison(stream);
    GPU_CHECK(kernels::HopperGemm(p, ws, stream));
    return Output(stream);
  }

 private:
  GemmCase c_;
  size_t count_;
  std::vector<uint16_t> x_, w_;
  DeviceArray<uint16_t> d_w_, d_x_;
  DeviceArray<float> d_y_;  // fp32, or bf16 in its first half
};

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class HopperGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(HopperGemmTest, MatchesReferenceAndRepeatsBitwise) {
  const GemmCase c = GetParam();
  Workspace ws;
  if (!ws.available()) GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  GemmRun run(c, rng);
  ASSERT_TRUE(kernels::HopperGemmSupported(run.Params(), ws.get()));
  // fp32 accumulation of bf16 products: fp32 output far under 1e-4; bf16 output ~ 2^-9.
  const double tol = c.y_f32 ? 1e-4 : 1e-2;
  std::mt19937_64 x_rng(seed + 1);
  const std::vector<double> want_a = run.SetX(x_rng);
  const std::vector<float> first = run.Launch(ws.get(), nullptr);
  EXPECT_LE(RelL2(first, want_a), tol);
  // Other inputs between two runs of the same: a launch that read a previous launch's shares
  // (a missing fence or counter reset) would give the first answer here.
  const std::vector<double> want_b = run.SetX(x_rng);
  EXPECT_LE(RelL2(run.Launch(ws.get(), nullptr), want_b), tol);
  std::mt19937_64 again(seed + 1);
  run.SetX(again);
  EXPECT_TRUE(BitwiseEqual(run.Launch(ws.get(), nullptr), first)) << "repeat differs";

  // Captured in a graph and replayed twice: bitwise equal to the eager launches.
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  GPU_CHECK(kernels::HopperGemm(run.Params(), ws.get(), stream));
  cudaGraph_t graph = nullptr;
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    run.Poison(stream);
    GPU_CHECK(cudaGraphLaunch(exec, stream));
    EXPECT_TRUE(BitwiseEqual(run.Output(stream), first)) << "replay " << replay << " differs";
  }
  GPU_CHECK(cudaGraphExecDestroy(exec));
  GPU_CHECK(cudaGraphDestroy(graph));
  GPU_CHECK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, HopperGemmTest,
    ::testing::Values(
        // Llama-3-8B's o projection at 64 rows: 32 tiles over 132 CTAs, every tile split.
        GemmCase{64, 4096, 4096, false, false, 128}, GemmCase{64, 4096, 4096, false, false, 256},
        // Fewer rows than wgmma's 64 (x zero-filled past m), k not a multiple of 64, n not a
        // multiple of the tile (the last tile's rows past n zero-filled, its columns not stored).
        GemmCase{17, 3072, 576, false, false, 128}, GemmCase{33, 520, 264, false, false, 128},
        GemmCase{9, 1000, 1032, false, false, 256}, GemmCase{1, 384, 72, false, false, 128},
        // Short tiles (3 k-blocks, ~3.6 iterations per CTA: whole tiles beside tiles split
        // between two CTAs) and a long one, fp32 output (LM heads).
        GemmCase{64, 20000, 192, false, true, 128}, GemmCase{40, 2056, 2048, false, true, 256},
        // The SiLU·mul epilogue: gate and up halves of the tile.
        GemmCase{64, 2 * 1536, 576, true, false, 128},
        GemmCase{24, 2 * 2048, 2048, true, false, 256},
        GemmCase{64, 2 * 14336, 128, true, false, 128}));

// Few CTAs: each runs hundreds of iterations, so the stage ring's barriers go through many
// phases (with 132 CTAs no CTA above runs more than ~16); plain and SiLU·mul, both tiles.
TEST(HopperGemmTest, FewCtasWrapTheStageRing) {
  for (const int ctas : {1, 3}) {
    Workspace ws(ctas);
    if (!ws.available()) GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
    for (const GemmCase& c : {GemmCase{40, 1024, 2048, false, false, 128},
                              GemmCase{64, 2 * 512, 1536, true, false, 256}}) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " ctas " << ctas << " n " << c.n);
      std::mt19937_64 rng(seed);
      GemmRun run(c, rng);
      const std::vector<double> want = run.SetX(rng);
      EXPECT_LE(RelL2(run.Launch(ws.get(), nullptr), want), 1e-2);
    }
  }
}

// Weights laid out for contiguous bulk copies (HopperTileWeights) land the same shared-memory
// image as the 2D copies of w: the outputs are bitwise equal, with partial tiles (n past the last
// full tile, k not a multiple of 64), fp32 output, SiLU·mul and both tile widths.
TEST(HopperGemmTest, TiledWeightsGiveTheSameBits) {
  Workspace ws;
  if (!ws.available()) GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
  for (const GemmCase& c : {GemmCase{64, 300, 200, false, false, 128},
                            GemmCase{37, 600, 136, false, true, 256},
                            GemmCase{16, 512, 256, true, false, 128},
                            GemmCase{64, 1024, 520, true, false, 256}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " n " << c.n << " k " << c.k
                                      << " tile " << c.tile_n);
    std::mt19937_64 rng(seed);
    GemmRun run(c, rng);
    const std::vector<double> want = run.SetX(rng);
    const std::vector<float> boxes = run.Launch(ws.get(), nullptr);
    EXPECT_LE(RelL2(boxes, want), 1e-2);
    EXPECT_TRUE(BitwiseEqual(run.LaunchTiled(ws.get(), nullptr), boxes));
  }
  // Refused: a tile width the layout does not have, n odd, k not a multiple of 8, SiLU halves
  // not a multiple of the half tile; and a tiled launch without its tile width.
  __nv_bfloat16* any = nullptr;
  EXPECT_EQ(kernels::HopperTileWeights(any, 256, 64, 64, false, any, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::HopperTileWeights(any, 255, 64, 128, false, any, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::HopperTileWeights(any, 256, 60, 128, false, any, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::HopperTileWeights(any, 2 * 96, 64, 128, true, any, nullptr),
            cudaErrorInvalidValue);
  kernels::HopperGemmParams untiled_width;
  untiled_width.m = 8, untiled_width.n = 256, untiled_width.k = 64;
  untiled_width.w_tiled = reinterpret_cast<const __nv_bfloat16*>(ws.get().partials);
  EXPECT_FALSE(kernels::HopperGemmSupported(untiled_width, ws.get()));
}

// Two launches back to back on one stream, the second reading the first's output as x and both
// using one workspace: the second (a programmatic dependent) must wait for the first before it
// reads x or touches the shares and counters.
TEST(HopperGemmTest, ChainedLaunchesWaitForTheirInput) {
  Workspace ws;
  if (!ws.available()) GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int m = 64, k1 = 2048, n1 = 1024, n2 = 1536;
  const auto x = ToBf16(RandomNormal(size_t{1} * m * k1, 1.0f, rng));
  const auto w1 = ToBf16(RandomNormal(size_t{1} * n1 * k1, 0.05f, rng));
  const auto w2 = ToBf16(RandomNormal(size_t{1} * n2 * n1, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w1(w1), d_w2(w2), d_y1(size_t{1} * m * n1),
      d_y2(size_t{1} * m * n2);
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int round = 0; round < 3; ++round) {
    GPU_CHECK(cudaMemsetAsync(d_y1.get(), 0xff, size_t{2} * m * n1, stream));
    GPU_CHECK(cudaMemsetAsync(d_y2.get(), 0xff, size_t{2} * m * n2, stream));
    GPU_CHECK(kernels::HopperGemm({d_x.bf16(), d_w1.bf16(), d_y1.get(), false, m, n1, k1},
                                  ws.get(), stream));
    GPU_CHECK(kernels::HopperGemm({d_y1.bf16(), d_w2.bf16(), d_y2.get(), false, m, n2, n1},
                                  ws.get(), stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> y1 = d_y1.ToHost();
    EXPECT_LE(RelL2(FromBf16(y1), Reference({m, n1, k1, false, false, 128}, x, w1)), 1e-2);
    EXPECT_LE(RelL2(FromBf16(d_y2.ToHost()), Reference({m, n2, n1, false, false, 128}, y1, w2)),
              1e-2)
        << "round " << round;
  }
  GPU_CHECK(cudaStreamDestroy(stream));
}

// Shapes HopperGemm refuses (MatmulContext then runs cuBLASLt).
TEST(HopperGemmTest, RefusesUnsupportedShapes) {
  Workspace ws;
  const auto p = [](int m, int n, int k, bool silu, bool f32, int tile) {
    kernels::HopperGemmParams q;
    q.x = q.w = reinterpret_cast<const __nv_bfloat16*>(uintptr_t{256});
    q.y = reinterpret_cast<void*>(uintptr_t{256});
    q.m = m, q.n = n, q.k = k, q.silu_mul = silu, q.y_f32 = f32, q.tile_n = tile;
    return q;
  };
  EXPECT_TRUE(kernels::HopperGemmSupported(p(64, 4096, 4096, false, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(65, 4096, 4096, false, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(0, 4096, 4096, false, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 4095, 4096, false, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 4096, 4100, false, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 4096, 4096, false, false, 64), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 2 * 100, 4096, true, false, 128), ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 2 * 128, 4096, true, true, 128), ws.get()));
  kernels::HopperGemmParams misaligned = p(8, 4096, 4096, false, false, 128);
  misaligned.x = reinterpret_cast<const __nv_bfloat16*>(uintptr_t{258});
  EXPECT_FALSE(kernels::HopperGemmSupported(misaligned, ws.get()));
  EXPECT_FALSE(kernels::HopperGemmSupported(p(8, 4096, 4096, false, false, 128),
                                            kernels::HopperGemmWorkspace{}));
}

// With RTGEN_HOPPER_GEMM=1, a custom-kernel MatmulContext on a device with the kernel routes
// 9..64 rows to it (without, none): Matmul (no cuBLASLt plan made for the shape), and
// MatmulSiluMul through the fused epilogue (p.y untouched), agree with Matmul + SiluMul.
TEST(HopperGemmTest, MatmulRoutesDecodeBatches) {
  int device = 0;
  GPU_CHECK(cudaGetDevice(&device));
  if (!kernels::HopperGemmAvailable(device)) {
    GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
  }
  auto plain = kernels::MatmulContext::Create(true);  // HopperGemm is opt-in
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->use_hopper_gemm());
  ASSERT_EQ(setenv("RTGEN_HOPPER_GEMM", "1", 1), 0);
  auto ctx = kernels::MatmulContext::Create(true);
  auto blas = kernels::MatmulContext::Create(false);
  ASSERT_EQ(unsetenv("RTGEN_HOPPER_GEMM"), 0);
  ASSERT_TRUE(ctx.ok() && blas.ok());
  ASSERT_TRUE((*ctx)->use_hopper_gemm());
  EXPECT_FALSE((*blas)->use_hopper_gemm());
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int m = 48, inter = 1536, k = 1024;
  const auto x = ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng));
  const auto w = ToBf16(RandomNormal(size_t{2} * inter * k, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w), d_gu(size_t{2} * m * inter), d_act(size_t{1} * m * inter),
      d_ref(size_t{1} * m * inter);
  const kernels::MatmulParams gate_up{d_x.bf16(), d_w.bf16(), d_gu.get(), false, m, 2 * inter, k};
  ASSERT_TRUE(kernels::MatmulSiluMul(**ctx, gate_up, d_act.bf16(), nullptr).ok());
  const std::vector<uint16_t> untouched = d_gu.ToHost();
  for (const uint16_t v : untouched) ASSERT_EQ(v, 0xffff) << "the fused path wrote p.y";
  ASSERT_TRUE(kernels::MatmulSiluMul(**blas, gate_up, d_ref.bf16(), nullptr).ok());
  EXPECT_LE(RelL2(FromBf16(d_act.ToHost()), FromBf16(d_ref.ToHost())), 1e-2);
  // Matmul: the same product as cuBLASLt's.
  DeviceArray<float> y(size_t{2} * m * inter), y_ref(size_t{2} * m * inter);
  ASSERT_TRUE(kernels::Matmul(**ctx, {d_x.bf16(), d_w.bf16(), y.get(), true, m, 2 * inter, k},
                              nullptr).ok());
  ASSERT_TRUE(kernels::Matmul(**blas, {d_x.bf16(), d_w.bf16(), y_ref.get(), true, m, 2 * inter, k},
                              nullptr).ok());
  EXPECT_LE(RelL2(y.ToHost(), y_ref.ToHost()), 1e-5);
  // Only the cuBLASLt context made a plan for the shape: the other ran HopperGemm.
  EXPECT_EQ((*ctx)->PlanInfo(m, 2 * inter, k, true), "");
  EXPECT_NE((*blas)->PlanInfo(m, 2 * inter, k, true), "");
}

}  // namespace
}  // namespace rtgen::testing_gpu
