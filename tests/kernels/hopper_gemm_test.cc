// HopperGemm (TMA + wgmma, stream-K over the SMs) against an fp64 reference on bf16 inputs: plain,
// fp32 output and the SiLU·mul epilogue, both tile widths, rows 1..64, shapes whose tiles are
// split between CTAs and shapes with partial tiles (n not a multiple of the tile, k of 64).
// Repeated launches and a graph replay are bitwise equal (the split tiles' fixed summing order,
// the tile counters reset by each launch); with RTGEN_HOPPER_GEMM=1 Matmul and MatmulSiluMul
// route 9..64 rows to it.

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

// The workspace of one stream, as MatmulContext allocates it.
class Workspace {
 public:
  Workspace() {
    int device = 0;
    GPU_CHECK(cudaGetDevice(&device));
    available_ = kernels::HopperGemmAvailable(device);
    int sms = 0;
    GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    partials_ = std::make_unique<DeviceArray<float>>(kernels::HopperGemmPartialBytes(sms) / 4);
    counters_ = std::make_unique<DeviceArray<uint32_t>>(kernels::kHopperGemmMaxTiles);
    GPU_CHECK(cudaMemset(counters_->get(), 0, kernels::kHopperGemmMaxTiles * sizeof(uint32_t)));
    ws_ = {partials_->get(), counters_->get(), sms};
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
  const std::vector<float> xf = FromBf16(x), wf = FromBf16(w);
  std::vector<double> full(size_t{1} * c.m * c.n);
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      const float* xr = &xf[size_t{1} * i * c.k];
      const float* wr = &wf[size_t{1} * j * c.k];
      double acc = 0.0;
      for (int kk = 0; kk < c.k; ++kk) acc += double{xr[kk]} * wr[kk];
      full[size_t{1} * i * c.n + j] = acc;
    }
  }
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

class HopperGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(HopperGemmTest, MatchesReferenceAndRepeatsBitwise) {
  const GemmCase c = GetParam();
  Workspace ws;
  if (!ws.available()) GTEST_SKIP() << "HopperGemm needs an sm_90a build on a CC 9.0 device";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const auto x = ToBf16(RandomNormal(size_t{1} * c.m * c.k, 1.0f, rng));
  const auto w = ToBf16(RandomNormal(size_t{1} * c.n * c.k, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w);
  const int cols = c.silu_mul ? c.n / 2 : c.n;
  const size_t count = size_t{1} * c.m * cols;
  DeviceArray<float> d_y(count);  // fp32 or bf16 (half used)
  const kernels::HopperGemmParams p{d_x.bf16(), d_w.bf16(), d_y.get(), c.y_f32, c.m,
                                    c.n,        c.k,        c.silu_mul, c.tile_n};
  ASSERT_TRUE(kernels::HopperGemmSupported(p, ws.get()));
  const auto run = [&](cudaStream_t stream) {
    GPU_CHECK(cudaMemsetAsync(d_y.get(), 0xff, count * sizeof(float), stream));
    GPU_CHECK(kernels::HopperGemm(p, ws.get(), stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> raw = d_y.ToHost();
    if (c.y_f32) return raw;
    std::vector<uint16_t> bits(count);
    std::memcpy(bits.data(), raw.data(), count * sizeof(uint16_t));
    return FromBf16(bits);
  };
  const std::vector<float> first = run(nullptr);
  // fp32 accumulation of bf16 products: fp32 output far under 1e-4; bf16 output ~ 2^-9.
  EXPECT_LE(RelL2(first, Reference(c, x, w)), c.y_f32 ? 1e-4 : 1e-2);
  const std::vector<float> second = run(nullptr);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), count * sizeof(float)), 0) << "repeat differs";

  // Captured in a graph and replayed twice: bitwise equal to the eager launches.
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  GPU_CHECK(kernels::HopperGemm(p, ws.get(), stream));
  cudaGraph_t graph = nullptr;
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    GPU_CHECK(cudaMemsetAsync(d_y.get(), 0xff, count * sizeof(float), stream));
    GPU_CHECK(cudaGraphLaunch(exec, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> raw = d_y.ToHost();
    std::vector<float> got = raw;
    if (!c.y_f32) {
      std::vector<uint16_t> bits(count);
      std::memcpy(bits.data(), raw.data(), count * sizeof(uint16_t));
      got = FromBf16(bits);
    }
    EXPECT_EQ(std::memcmp(first.data(), got.data(), count * sizeof(float)), 0)
        << "replay " << replay << " differs";
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
        // More iterations than CTAs by far (whole tiles per CTA), fp32 output (LM heads).
        GemmCase{64, 20000, 192, false, true, 128}, GemmCase{40, 2056, 2048, false, true, 256},
        // The SiLU·mul epilogue: gate and up halves of the tile.
        GemmCase{64, 2 * 1536, 576, true, false, 128},
        GemmCase{24, 2 * 2048, 2048, true, false, 256},
        GemmCase{64, 2 * 14336, 128, true, false, 128}));

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
// 9..64 rows to it (without, none): Matmul, and
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
}

}  // namespace
}  // namespace rtgen::testing_gpu
