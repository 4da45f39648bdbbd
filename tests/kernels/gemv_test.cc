// The decode GEMV (kernels/gemv.h) at its tile edges against a CPU reference: n not a multiple of
// the 8-feature tile, every m from 1 to kGemvMaxRows (both halves of the mma's batch operand) and
// sliced row counts up to kGemvMaxSlicedRows (GemvRowCounts), k a multiple of 8 but not of the
// 32-element step or of a whole group, every launch shape (at the widest unroll the input chunks
// are loaded ahead of the multiplies where gemv.cu's XAheadFor says so: one row, or weights of at
// most 4 MiB; the 1000 x 4104 weight at 2-8 rows takes the other path); outputs are poisoned
// first and the elements past y[m, n] must stay untouched. Also: the same call twice and its graph
// replay give bitwise equal results. The fused gate_up + SiLU·mul variant (GemvSiluMul) against
// the same reference at every row count and launch shape, and against the unfused GEMV + SiluMul
// pair.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"
#include "kernels/gemv.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct GemvCase {
  int n, k;
};

constexpr int kGuard = 64;  // elements past the output that must keep their poison

class GemvEdgeTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvEdgeTest, EveryRowCountAndLaunchShapeMatchesReference) {
  const GemvCase c = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int max_m = kernels::kGemvMaxSlicedRows;
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * max_m * c.k, 1.0f, rng));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * c.n * c.k, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w);
  std::vector<kernels::GemvTuning> tunings = {{0, 0}};
  for (int warps : {1, 2, 4, 8}) {
    for (int unroll : {2, 4, 8}) tunings.push_back({warps, unroll});
  }
  for (const int m : GemvRowCounts()) {
    SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << c.n << " k=" << c.k);
    // The reference for the first m rows (x is row-major: a prefix of it is x[:m]).
    const std::vector<uint16_t> xm(x.begin(), x.begin() + static_cast<size_t>(m) * c.k);
    const std::vector<double> want = MatmulReference(xm, w, m, c.n, c.k);
    const size_t count = static_cast<size_t>(m) * c.n;
    for (const bool f32 : {false, true}) {
      for (const kernels::GemvTuning& t : tunings) {
        SCOPED_TRACE(::testing::Message() << "f32=" << f32 << " warps=" << t.warps
                                          << " unroll=" << t.unroll);
        DeviceArray<float> d_yf(count + kGuard);
        DeviceArray<uint16_t> d_yb(count + kGuard);
        void* y = f32 ? static_cast<void*>(d_yf.get()) : static_cast<void*>(d_yb.get());
        const kernels::GemvParams p{d_x.bf16(), d_w.bf16(), y, f32, m, c.n, c.k};
        ASSERT_TRUE(kernels::GemvSupported(p));
        const cudaError_t err =
            t.warps == 0 ? kernels::Gemv(p, nullptr) : kernels::GemvTuned(p, t, nullptr);
        ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
        std::vector<float> out;
        if (f32) {
          std::vector<float> all = d_yf.ToHost();
          for (size_t i = count; i < all.size(); ++i) {
            uint32_t bits;
            std::memcpy(&bits, &all[i], 4);
            ASSERT_EQ(bits, 0xffffffffu) << "wrote past the output at " << i;
          }
          out.assign(all.begin(), all.begin() + count);
        } else {
          std::vector<uint16_t> all = d_yb.ToHost();
          for (size_t i = count; i < all.size(); ++i) {
            ASSERT_EQ(all[i], 0xffff) << "wrote past the output at " << i;
          }
          out = FromBf16(std::vector<uint16_t>(all.begin(), all.begin() + count));
        }
        // fp32 accumulation of bf16 products: fp32 output far under 1e-3; bf16 output ~ 2^-9.
        // RelL2 is +inf when an element was left unwritten (poison is NaN).
        EXPECT_LE(RelL2(out, want), f32 ? 1e-4 : 1e-2);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvEdgeTest,
                         ::testing::Values(GemvCase{1, 8}, GemvCase{7, 40}, GemvCase{9, 72},
                                           GemvCase{130, 520}, GemvCase{33, 1544},
                                           GemvCase{1000, 4104}, GemvCase{576, 576}));

struct SwiGluCase {
  int inter, k;
};

class GemvSiluMulTest : public ::testing::TestWithParam<SwiGluCase> {};

TEST_P(GemvSiluMulTest, EveryRowCountAndLaunchShapeMatchesReference) {
  const SwiGluCase c = GetParam();
  const int n = 2 * c.inter;
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int max_m = kernels::kGemvMaxSlicedRows;
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * max_m * c.k, 1.0f, rng));
  // Products of stddev ~2 so that silu sees both signs and its curved part.
  const float wstd = 2.0f / std::sqrt(static_cast<float>(c.k));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * n * c.k, wstd, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w);
  std::vector<kernels::GemvTuning> tunings = {{0, 0}};
  for (int warps : {1, 2, 4, 8}) {
    for (int unroll : {2, 4, 8}) tunings.push_back({warps, unroll});
  }
  size_t mismatches = 0, compared = 0;
  for (const int m : GemvRowCounts()) {
    SCOPED_TRACE(::testing::Message() << "m=" << m << " inter=" << c.inter << " k=" << c.k);
    const std::vector<uint16_t> xm(x.begin(), x.begin() + static_cast<size_t>(m) * c.k);
    const std::vector<double> gate_up = MatmulReference(xm, w, m, n, c.k);
    std::vector<double> want(static_cast<size_t>(m) * c.inter);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < c.inter; ++j) {
        const double g = gate_up[static_cast<size_t>(i) * n + j];
        const double u = gate_up[static_cast<size_t>(i) * n + c.inter + j];
        want[static_cast<size_t>(i) * c.inter + j] = g / (1.0 + std::exp(-g)) * u;
      }
    }
    const size_t count = static_cast<size_t>(m) * c.inter;
    // The unfused pair, for the bitwise comparison.
    DeviceArray<uint16_t> d_gu(static_cast<size_t>(m) * n), d_ref(count);
    ASSERT_EQ(kernels::Gemv({d_x.bf16(), d_w.bf16(), d_gu.get(), false, m, n, c.k}, nullptr),
              cudaSuccess);
    ASSERT_EQ(kernels::SiluMul({d_gu.bf16(), d_ref.bf16(), m, c.inter}, nullptr), cudaSuccess);
    const std::vector<uint16_t> unfused = d_ref.ToHost();
    for (const kernels::GemvTuning& t : tunings) {
      SCOPED_TRACE(::testing::Message() << "warps=" << t.warps << " unroll=" << t.unroll);
      DeviceArray<uint16_t> d_y(count + kGuard);
      const kernels::GemvParams p{d_x.bf16(), d_w.bf16(), d_y.get(), false, m, n, c.k};
      ASSERT_TRUE(kernels::GemvSiluMulSupported(p));
      const cudaError_t err = t.warps == 0 ? kernels::GemvSiluMul(p, nullptr)
                                           : kernels::GemvSiluMulTuned(p, t, nullptr);
      ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
      const std::vector<uint16_t> all = d_y.ToHost();
      for (size_t i = count; i < all.size(); ++i) {
        ASSERT_EQ(all[i], 0xffff) << "wrote past the output at " << i;
      }
      const std::vector<uint16_t> got(all.begin(), all.begin() + count);
      // bf16 gate, up and output, each rounded once (2^-9 relative); silu multiplies a gate's
      // relative error by |1 + g (1 - sigmoid(g))| (about 4 at g = -5, 7 at -8), so one element
      // may be off by 1-2 % (seen: 1.27 % at m = 1, inter = 1), while over 16 or more elements
      // the L2 stays under 1 %. NaN poison left unwritten is +inf.
      EXPECT_LE(RelL2(FromBf16(got), want), count < 16 ? 2e-2 : 1e-2);
      // The default launch shape is the unfused GEMV's (same warps split k the same way): same
      // sums in the same order and the same roundings, so bit for bit the pair's output. Other
      // launch shapes split k differently from the default (counted for the log), but each is
      // bit for bit the unfused GEMV of that same launch shape then SiluMul: one wrong element
      // or block of these launches would hide under the L2 bound at large m * inter.
      size_t differ = 0;
      for (size_t i = 0; i < count; ++i) differ += got[i] != unfused[i];
      if (t.warps == 0) {
        EXPECT_EQ(differ, 0u) << "default launch differs from GEMV + SiluMul";
      } else {
        mismatches += differ;
        compared += count;
        DeviceArray<uint16_t> d_gu_t(static_cast<size_t>(m) * n), d_ref_t(count);
        ASSERT_EQ(kernels::GemvTuned({d_x.bf16(), d_w.bf16(), d_gu_t.get(), false, m, n, c.k}, t,
                                     nullptr),
                  cudaSuccess);
        ASSERT_EQ(kernels::SiluMul({d_gu_t.bf16(), d_ref_t.bf16(), m, c.inter}, nullptr),
                  cudaSuccess);
        EXPECT_EQ(got, d_ref_t.ToHost()) << "differs from GemvTuned + SiluMul at its shape";
      }
    }
  }
  std::printf("[ info ] GemvSiluMul inter=%d k=%d, other launch shapes: %zu of %zu bitwise "
              "different from the default-shape GEMV + SiluMul\n",
              c.inter, c.k, mismatches, compared);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvSiluMulTest,
                         ::testing::Values(SwiGluCase{1, 8}, SwiGluCase{3, 40},
                                           SwiGluCase{65, 72}, SwiGluCase{130, 520},
                                           SwiGluCase{768, 576}, SwiGluCase{4100, 1544}));

TEST(GemvTest, RejectsUnsupportedShapes) {
  DeviceArray<uint16_t> buf(4096);
  const auto* x = buf.bf16();
  kernels::GemvParams p{x, x, buf.get(), false, 1, 8, 64};
  EXPECT_TRUE(kernels::GemvSupported(p));
  for (int m : {0, kernels::kGemvMaxSlicedRows + 1}) {
    kernels::GemvParams q = p;
    q.m = m;
    EXPECT_FALSE(kernels::GemvSupported(q)) << m;
  }
  kernels::GemvParams q = p;
  q.k = 60;
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = p;
  q.x = x + 1;  // 2-byte aligned
  EXPECT_FALSE(kernels::GemvSupported(q));
  EXPECT_EQ(kernels::Gemv(q, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::GemvTuned(p, {3, 4}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::GemvTuned(p, {4, 16}, nullptr), cudaErrorInvalidValue);
  EXPECT_TRUE(kernels::GemvSiluMulSupported(p));
  q = p;
  q.n = 7;  // no [gate; up] split
  EXPECT_FALSE(kernels::GemvSiluMulSupported(q));
  EXPECT_EQ(kernels::GemvSiluMul(q, nullptr), cudaErrorInvalidValue);
  q = p;
  q.y_f32 = true;
  EXPECT_FALSE(kernels::GemvSiluMulSupported(q));
}

// The evict-first cache policy on the weight loads (GemvTuning::evict_first) is a hint to L2:
// every output bit must be the same with and without it, for the plain and the SwiGLU epilogue.
TEST(GemvTest, EvictFirstLoadsChangeNoBit) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int n = 1006, k = 4104;  // a partial last tile; k not a whole number of groups
  DeviceArray<uint16_t> d_x(ToBf16(RandomNormal(size_t{1} * kernels::kGemvMaxRows * k, 1.0f, rng)));
  DeviceArray<uint16_t> d_w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng)));
  for (const int m : {1, 9}) {
    for (const bool swiglu : {false, true}) {
      for (const kernels::GemvTuning shape :
           {kernels::GemvTuning{4, 8}, kernels::GemvTuning{1, 2}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " swiglu=" << swiglu
                                          << " warps=" << shape.warps);
        std::vector<uint16_t> outputs[2];
        for (const int evict_first : {0, 1}) {
          DeviceArray<uint16_t> d_y(size_t{1} * m * (swiglu ? n / 2 : n));  // poisoned
          const kernels::GemvParams p{d_x.bf16(), d_w.bf16(), d_y.get(), false, m, n, k};
          kernels::GemvTuning t = shape;
          t.evict_first = evict_first;
          const cudaError_t err = swiglu ? kernels::GemvSiluMulTuned(p, t, nullptr)
                                         : kernels::GemvTuned(p, t, nullptr);
          ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
          outputs[evict_first] = d_y.ToHost();
        }
        for (const uint16_t v : outputs[0]) ASSERT_NE(v, 0xffff) << "an output left unwritten";
        EXPECT_EQ(outputs[1], outputs[0]);
      }
    }
  }
}

// The one-row kernels of large weights (GemvTuning::rows: the row-streaming kernel; with slab,
// the slab kernel) against the fp64 reference at tile and group edges: odd n (a last unit with
// one stored row), k not a multiple of the 1024 elements a lane group covers per round (rows),
// slabs of one unit to dozens a block (SwiGLU's gate rows then up rows over 16 units a block at
// n = 8192), and x past the 48 KiB of shared memory a launch gets without asking (k = 32768)
// (slab); bf16 and fp32
// output, nothing written past y; the SwiGLU variant bit for bit the plain one followed by
// SiluMul; the default tuning picks rows for large weights with many features only, and not the
// slab kernel (opt-in).
TEST(GemvTest, OneRowKernelsMatchReference) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<GemvCase> rows_cases = {GemvCase{1, 8}, GemvCase{7, 40}, GemvCase{130, 520},
                                            GemvCase{1001, 4104}, GemvCase{64, 14344}};
  const std::vector<GemvCase> slab_cases = {GemvCase{1, 1024}, GemvCase{7, 2048},
                                            GemvCase{1001, 4096}, GemvCase{64, 14336},
                                            GemvCase{20001, 1024}, GemvCase{8192, 1024},
                                            GemvCase{3, 32768}};
  for (const bool slab : {false, true}) {
    SCOPED_TRACE(slab ? "slab kernel" : "row-streaming kernel");
    kernels::GemvTuning rows;
    rows.rows = true;
    rows.slab = slab;
    for (const GemvCase c : slab ? slab_cases : rows_cases) {
      SCOPED_TRACE(::testing::Message() << "n=" << c.n << " k=" << c.k);
      const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * c.k, 1.0f, rng));
      const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * c.n * c.k, 0.05f, rng));
      DeviceArray<uint16_t> d_x(x), d_w(w);
      const std::vector<double> want = MatmulReference(x, w, 1, c.n, c.k);
      for (const bool f32 : {false, true}) {
        SCOPED_TRACE(f32 ? "fp32 out" : "bf16 out");
        DeviceArray<float> d_yf(c.n + kGuard);
        DeviceArray<uint16_t> d_yb(c.n + kGuard);
        void* y = f32 ? static_cast<void*>(d_yf.get()) : static_cast<void*>(d_yb.get());
        ASSERT_EQ(kernels::GemvTuned({d_x.bf16(), d_w.bf16(), y, f32, 1, c.n, c.k}, rows, nullptr),
                  cudaSuccess);
        std::vector<float> out;
        if (f32) {
          const std::vector<float> all = d_yf.ToHost();
          for (size_t i = c.n; i < all.size(); ++i) ASSERT_TRUE(std::isnan(all[i])) << i;
          out.assign(all.begin(), all.begin() + c.n);
        } else {
          const std::vector<uint16_t> all = d_yb.ToHost();
          for (size_t i = c.n; i < all.size(); ++i) ASSERT_EQ(all[i], 0xffff) << i;
          out = FromBf16(std::vector<uint16_t>(all.begin(), all.begin() + c.n));
        }
        EXPECT_LE(RelL2(out, want), f32 ? 1e-4 : 1e-2);
      }
      if (c.n % 2 != 0) continue;
      // SwiGLU: [gate; up] = the n rows, act = silu(gate) * up over n / 2 features.
      const int inter = c.n / 2;
      DeviceArray<uint16_t> d_plain(c.n), d_act(inter), d_fused(inter + kGuard);
      ASSERT_EQ(kernels::GemvTuned({d_x.bf16(), d_w.bf16(), d_plain.get(), false, 1, c.n, c.k},
                                   rows, nullptr),
                cudaSuccess);
      ASSERT_EQ(kernels::SiluMul({d_plain.bf16(), d_act.bf16(), 1, inter}, nullptr), cudaSuccess);
      ASSERT_EQ(kernels::GemvSiluMulTuned({d_x.bf16(), d_w.bf16(), d_fused.get(), false, 1, c.n,
                                           c.k},
                                          rows, nullptr),
                cudaSuccess);
      const std::vector<uint16_t> fused = d_fused.ToHost();
      EXPECT_EQ(std::vector<uint16_t>(fused.begin(), fused.begin() + inter), d_act.ToHost());
      for (size_t i = inter; i < fused.size(); ++i) ASSERT_EQ(fused[i], 0xffff) << i;
    }
  }
  // Two input rows are refused, and the slab kernel refuses a k it cannot split into its warps'
  // 1024-element spans; the default takes rows only for one row of a large weight.
  DeviceArray<uint16_t> buf(4096);
  kernels::GemvTuning rows;
  rows.rows = true;
  EXPECT_EQ(kernels::GemvTuned({buf.bf16(), buf.bf16(), buf.get(), false, 2, 8, 64}, rows,
                               nullptr),
            cudaErrorInvalidValue);
  rows.slab = true;
  EXPECT_EQ(kernels::GemvTuned({buf.bf16(), buf.bf16(), buf.get(), false, 1, 2, 1032}, rows,
                               nullptr),
            cudaErrorInvalidValue);
  const int64_t big = kernels::GemvRowsMinBytes();
  if (big < (int64_t{1} << 40)) {
    // n rows of k: just the threshold's bytes with n >= 4096 output features.
    const int n = 4096, k = SmallestRowsK(n);
    EXPECT_TRUE(kernels::GemvDefaultTuning({nullptr, nullptr, nullptr, false, 1, n, k}).rows);
    EXPECT_FALSE(kernels::GemvDefaultTuning({nullptr, nullptr, nullptr, false, 2, n, k}).rows);
    EXPECT_FALSE(kernels::GemvDefaultTuning({nullptr, nullptr, nullptr, false, 1, n, k - 8}).rows);
    // Fewer features, as many bytes: the tensor-core kernel.
    EXPECT_FALSE(
        kernels::GemvDefaultTuning({nullptr, nullptr, nullptr, false, 1, n / 2, 2 * k}).rows);
  }
  if (std::getenv("RTGEN_GEMV_SLAB") == nullptr && big <= int64_t{4096} * 4096 * 2) {
    // The slab kernel is opt-in: Llama-3-8B's o projection (k = 4096) streams by rows.
    const kernels::GemvTuning o =
        kernels::GemvDefaultTuning({nullptr, nullptr, nullptr, false, 1, 4096, 4096});
    EXPECT_TRUE(o.rows);
    EXPECT_FALSE(o.slab);
  }
}

TEST(GemvTest, RepeatedAndGraphReplayedCallsAreBitwiseEqual) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int m = 8, n = 4100, k = 4096;
  DeviceArray<uint16_t> d_x(ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng)));
  DeviceArray<uint16_t> d_w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng)));
  DeviceArray<float> y0(size_t{1} * m * n), y1(size_t{1} * m * n), y2(size_t{1} * m * n);
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  kernels::GemvParams p{d_x.bf16(), d_w.bf16(), y0.get(), true, m, n, k};
  ASSERT_EQ(kernels::Gemv(p, stream), cudaSuccess);
  p.y = y1.get();
  ASSERT_EQ(kernels::Gemv(p, stream), cudaSuccess);
  p.y = y2.get();
  cudaGraph_t graph;
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ASSERT_EQ(kernels::Gemv(p, stream), cudaSuccess);
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CHECK(cudaGraphLaunch(exec, stream));
  GPU_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> a = y0.ToHost(), b = y1.ToHost(), c = y2.ToHost();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace rtgen::testing_gpu
