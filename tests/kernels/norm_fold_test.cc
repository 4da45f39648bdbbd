// The pieces of folded-norm decode steps (kernels/model_forward.h FoldsNorms) against CPU
// references: the weight fold, the embedding's bf16 rows, RMSNorm over a bf16 residual, the rows'
// 1 / rms, SiLU·mul and RoPE + KV store scaling rows by it, and Matmul adding into its output in
// place.

#include <cmath>
#include <cstring>
#include <numeric>

#include "gtest/gtest.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/norm_fold.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/rope_inv_freq.h"
#include "kernels/row_rms.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

constexpr double kBf16Tol = 1e-2;  // rel L2 for bf16 outputs
constexpr float kEps = 1e-5f;

// 1 / sqrt(mean(row^2) + eps) in fp64 of row t of bf16 rows [*, hidden].
double InvRms(const std::vector<uint16_t>& rows, int t, int hidden) {
  double ss = 0.0;
  for (int j = 0; j < hidden; ++j) {
    const double v = FromBf16(rows[size_t{1} * t * hidden + j]);
    ss += v * v;
  }
  return 1.0 / std::sqrt(ss / hidden + kEps);
}

// Residual rows of different magnitudes, so a wrong row's scale shows.
std::vector<uint16_t> ResidualRows(int rows, int hidden, std::mt19937_64& rng) {
  std::vector<float> v;
  for (int t = 0; t < rows; ++t) {
    const std::vector<float> row = RandomNormal(hidden, 0.5f + 0.7f * t, rng);
    v.insert(v.end(), row.begin(), row.end());
  }
  return ToBf16(v);
}

TEST(NormFoldTest, FoldsTheNormWeightIntoColumnsAndLeavesOnes) {
  for (auto [rows, k] : {std::pair{37, 100}, std::pair{5, 4096}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * rows * k, 0.02f, rng));
    const std::vector<float> gamma = RandomUniform(k, 0.2f, 3.0f, rng);
    DeviceArray<uint16_t> d_w(w);
    DeviceArray<float> d_gamma(gamma);
    GPU_CHECK(kernels::FoldNormIntoWeight(d_gamma.get(), d_w.bf16(), rows, k, nullptr));
    const std::vector<uint16_t> got = d_w.ToHost();
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(got[i], ToBf16(FromBf16(w[i]) * gamma[i % k])) << "element " << i;
    }
    for (const float g : d_gamma.ToHost()) ASSERT_EQ(g, 1.0f);
  }
  DeviceArray<float> g(4);
  DeviceArray<uint16_t> w(4);
  EXPECT_EQ(kernels::FoldNormIntoWeight(g.get(), w.bf16(), 0, 4, nullptr), cudaErrorInvalidValue);
}

TEST(NormFoldTest, EmbeddingWritesExactBf16Rows) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int vocab = 300;
  for (const int hidden : {4096, 100}) {  // the vector path, then the scalar one
    const std::vector<uint16_t> table = ToBf16(RandomNormal(size_t{1} * vocab * hidden, 1, rng));
    const std::vector<int32_t> ids = {5, -1, 299, 300, 5};
    DeviceArray<uint16_t> d_table(table);
    DeviceArray<int32_t> d_ids(ids);
    DeviceArray<float> d_out(ids.size() * hidden);  // poisoned: must stay so
    DeviceArray<uint16_t> d_out16(ids.size() * hidden);
    kernels::EmbeddingParams p{d_table.bf16(), d_ids.get(), d_out.get(),
                               static_cast<int32_t>(ids.size()), hidden, vocab};
    p.out16 = d_out16.bf16();
    GPU_CHECK(kernels::Embedding(p, nullptr));
    const std::vector<uint16_t> got = d_out16.ToHost();
    for (size_t t = 0; t < ids.size(); ++t) {
      const bool valid = ids[t] >= 0 && ids[t] < vocab;
      for (int j = 0; j < hidden; ++j) {
        const uint16_t want = valid ? table[size_t{1} * ids[t] * hidden + j] : ToBf16(0.0f);
        ASSERT_EQ(got[t * hidden + j], want) << "hidden " << hidden << " token " << t;
      }
    }
    for (const float f : d_out.ToHost()) ASSERT_TRUE(std::isnan(f)) << "fp32 rows written";
  }
}

TEST(NormFoldTest, RmsNormReadsABf16Residual) {
  for (auto [rows, hidden] : {std::pair{6, 4096}, std::pair{3, 1002}}) {  // vector, scalar
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> res = ResidualRows(rows, hidden, rng);
    const std::vector<float> weight = RandomUniform(hidden, 0.5f, 1.5f, rng);
    const std::vector<int32_t> gather = {rows - 1, 0};
    DeviceArray<uint16_t> d_res(res);
    DeviceArray<float> d_w(weight);
    DeviceArray<int32_t> d_rows(gather);
    DeviceArray<uint16_t> d_out(size_t{2} * hidden);
    kernels::RmsNormParams p{nullptr, nullptr, d_rows.get(), d_w.get(), d_out.bf16(), 2, hidden,
                             kEps};
    p.residual16 = d_res.bf16();
    GPU_CHECK(kernels::RmsNorm(p, nullptr));
    const std::vector<float> out = FromBf16(d_out.ToHost());
    std::vector<double> want(out.size());
    for (int i = 0; i < 2; ++i) {
      const double inv = InvRms(res, gather[i], hidden);
      for (int j = 0; j < hidden; ++j) {
        want[size_t{1} * i * hidden + j] =
            FromBf16(res[size_t{1} * gather[i] * hidden + j]) * inv * weight[j];
      }
    }
    EXPECT_LE(RelL2(out, want), kBf16Tol) << rows << "x" << hidden;
    EXPECT_EQ(d_res.ToHost(), res) << "the bf16 residual is read only";
    DeviceArray<float> fp32_res(size_t{1} * rows * hidden);
    DeviceArray<uint16_t> add(size_t{1} * rows * hidden);
    kernels::RmsNormParams both = p;  // two residuals
    both.residual = fp32_res.get();
    EXPECT_EQ(kernels::RmsNorm(both, nullptr), cudaErrorInvalidValue);
    kernels::RmsNormParams with_add = p;  // nothing is added to a bf16 residual
    with_add.add = add.bf16();
    EXPECT_EQ(kernels::RmsNorm(with_add, nullptr), cudaErrorInvalidValue);
  }
}

// RowInvRms's scales of rows [n, hidden] into `scales` on the device.
void DeviceInvRms(const DeviceArray<uint16_t>& rows, int n, int hidden,
                  const DeviceArray<float>& scales) {
  GPU_CHECK(kernels::RowInvRms({rows.bf16(), scales.get(), n, hidden, kEps}, nullptr));
}

TEST(NormFoldTest, RowInvRmsMatchesFp64) {
  // 64 x 4096: Llama-3-8B's batch-64 rows (vector path, one warp per row); 300 rows: warps take
  // several rows each; 8200: more than one pass of loads per lane; 100 and 4100: the scalar path.
  for (auto [n, hidden] : {std::pair{64, 4096}, std::pair{300, 576}, std::pair{3, 8200},
                           std::pair{5, 100}, std::pair{17, 4100}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> res = ResidualRows(n, hidden, rng);
    DeviceArray<uint16_t> d_res(res);
    DeviceArray<float> d_scales(n + 1);  // poisoned (NaN): the element past the rows must stay so
    DeviceInvRms(d_res, n, hidden, d_scales);
    const std::vector<float> got = d_scales.ToHost();
    for (int t = 0; t < n; ++t) {
      ASSERT_NEAR(got[t], InvRms(res, t, hidden), 1e-5 * InvRms(res, t, hidden))
          << n << "x" << hidden << " row " << t;
    }
    EXPECT_TRUE(std::isnan(got[n])) << "wrote past the rows";
  }
  DeviceArray<uint16_t> rows(8);
  DeviceArray<float> out(1);
  EXPECT_EQ(kernels::RowInvRms({rows.bf16(), out.get(), 1, 0, kEps}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::RowInvRms({nullptr, out.get(), 1, 8, kEps}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::RowInvRms({nullptr, nullptr, 0, 8, kEps}, nullptr), cudaSuccess);
}

TEST(NormFoldTest, SiluMulScalesEachRowByItsRms) {
  // 14336: Llama-3-8B's intermediate size (vector path); 100: the scalar path.
  for (auto [tokens, inter, hidden] : {std::tuple{9, 14336, 4096}, std::tuple{5, 100, 300}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> in = ToBf16(RandomNormal(size_t{2} * tokens * inter, 2.0f, rng));
    const std::vector<uint16_t> res = ResidualRows(tokens, hidden, rng);
    DeviceArray<uint16_t> d_in(in), d_res(res);
    DeviceArray<uint16_t> d_out(size_t{1} * tokens * inter);
    DeviceArray<float> scales(tokens);
    DeviceInvRms(d_res, tokens, hidden, scales);
    GPU_CHECK(kernels::SiluMul({d_in.bf16(), d_out.bf16(), tokens, inter, {scales.get()}},
                               nullptr));
    const std::vector<float> out = FromBf16(d_out.ToHost());
    std::vector<double> want(out.size());
    for (int t = 0; t < tokens; ++t) {
      const double s = InvRms(res, t, hidden);
      for (int i = 0; i < inter; ++i) {
        const double g = s * FromBf16(in[size_t{2} * t * inter + i]);
        const double u = s * FromBf16(in[size_t{2} * t * inter + inter + i]);
        want[size_t{1} * t * inter + i] = g / (1.0 + std::exp(-g)) * u;
      }
    }
    EXPECT_LE(RelL2(out, want), kBf16Tol) << tokens << "x" << inter;
  }
}

// q and k rotated and scaled, the caches holding the scaled rotated k and the scaled v.
TEST(NormFoldTest, RopeKvStoreScalesQkvByEachRowsRms) {
  struct Shape {
    int tokens, heads, kv_heads, hd, hidden;
  };
  // Llama-3-8B's heads at 16 rows (vector path); head_dim 12 (scalar path).
  for (const Shape s : {Shape{16, 32, 8, 128, 4096}, Shape{3, 2, 1, 12, 300}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    ModelConfig c = TinyConfig();
    c.head_dim = s.hd;
    const std::vector<float> inv_freq = kernels::RopeInvFreq(c);
    const int q_dim = s.heads * s.hd, kv_dim = s.kv_heads * s.hd, stride = q_dim + 2 * kv_dim;
    const std::vector<uint16_t> rows = ToBf16(RandomNormal(size_t{1} * s.tokens * stride, 1, rng));
    const std::vector<uint16_t> res = ResidualRows(s.tokens, s.hidden, rng);
    std::vector<int32_t> pos(s.tokens), slots(s.tokens);
    std::uniform_int_distribution<int32_t> pd(0, 5000);
    for (int32_t& p : pos) p = pd(rng);
    std::iota(slots.begin(), slots.end(), 0);
    std::reverse(slots.begin(), slots.end());
    DeviceArray<uint16_t> d_rows(rows), d_res(res);
    DeviceArray<int32_t> d_pos(pos), d_slots(slots);
    DeviceArray<float> d_freq(inv_freq);
    DeviceArray<uint16_t> k_cache(size_t{1} * s.tokens * kv_dim), v_cache(k_cache.ToHost());
    kernels::RopeParams rope{d_rows.bf16(), d_rows.bf16() + q_dim, stride, d_pos.get(),
                             d_freq.get(), s.tokens, s.heads, s.kv_heads, s.hd};
    DeviceArray<float> scales(s.tokens);
    DeviceInvRms(d_res, s.tokens, s.hidden, scales);
    rope.norm = {scales.get()};
    const kernels::KvStoreParams store{d_rows.bf16() + q_dim, d_rows.bf16() + q_dim + kv_dim,
                                       stride, k_cache.bf16(), v_cache.bf16(), d_slots.get(),
                                       s.tokens, kv_dim};
    GPU_CHECK(kernels::RopeKvStore(rope, store, nullptr));
    const std::vector<float> got_rows = FromBf16(d_rows.ToHost());
    const std::vector<float> got_k = FromBf16(k_cache.ToHost());
    const std::vector<float> got_v = FromBf16(v_cache.ToHost());
    std::vector<float> got_qk;
    std::vector<double> want_qk, want_k(got_k.size()), want_v(got_v.size());
    const int half = s.hd / 2;
    for (int t = 0; t < s.tokens; ++t) {
      const double sc = InvRms(res, t, s.hidden);
      const size_t row = size_t{1} * t * stride, cache = size_t{1} * slots[t] * kv_dim;
      for (int h = 0; h < s.heads + s.kv_heads; ++h) {
        for (int i = 0; i < s.hd; ++i) {
          const size_t at = row + size_t{1} * h * s.hd;
          const int j = i < half ? i : i - half;
          const double a = FromBf16(rows[at + j]), b = FromBf16(rows[at + j + half]);
          const double ang = static_cast<double>(pos[t]) * inv_freq[j];
          const double r = sc * (i < half ? a * std::cos(ang) - b * std::sin(ang)
                                          : b * std::cos(ang) + a * std::sin(ang));
          got_qk.push_back(got_rows[at + i]);
          want_qk.push_back(r);
          if (h >= s.heads) want_k[cache + (h - s.heads) * s.hd + i] = r;
        }
      }
      for (int i = 0; i < kv_dim; ++i) {
        want_v[cache + i] = sc * FromBf16(rows[row + q_dim + kv_dim + i]);
      }
    }
    EXPECT_LE(RelL2(got_qk, want_qk), kBf16Tol) << "q and k rows";
    EXPECT_LE(RelL2(got_k, want_k), kBf16Tol) << "k cache";
    EXPECT_LE(RelL2(got_v, want_v), kBf16Tol) << "v cache";
  }
}

// y += x w^T in place, on cuBLASLt even at a shape the GEMV would take; by the heuristic's
// algorithm, and by a tuned one (tuning times candidates in place on a stand-in output, so the
// call's own output must still hold y0 + x w^T, not a candidate's result plus it).
TEST(NormFoldTest, MatmulAccumulatesIntoItsOutput) {
  auto plain = kernels::MatmulContext::Create(true, false);
  auto tuned = kernels::MatmulContext::Create(true, true);
  ASSERT_TRUE(plain.ok() && tuned.ok());
  (*tuned)->AllowTuning(true);
  for (auto [m, n, k] : {std::tuple{1, 576, 576}, std::tuple{16, 4096, 4096},
                         std::tuple{64, 6144, 4096}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng));
    const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * n * k, 0.02f, rng));
    const std::vector<uint16_t> y0 = ToBf16(RandomNormal(size_t{1} * m * n, 1.0f, rng));
    std::vector<double> want = MatmulReference(x, w, m, n, k);
    for (size_t i = 0; i < want.size(); ++i) want[i] += FromBf16(y0[i]);
    DeviceArray<uint16_t> d_x(x), d_w(w);
    for (kernels::MatmulContext* ctx : {plain->get(), tuned->get()}) {
      DeviceArray<uint16_t> d_y(y0);
      kernels::MatmulParams p{d_x.bf16(), d_w.bf16(), d_y.bf16(), false, m, n, k};
      p.accumulate = true;
      EXPECT_TRUE(kernels::MatmulRunsOnCublas(*ctx, p));
      ASSERT_TRUE(kernels::Matmul(*ctx, p, nullptr).ok());
      const std::vector<float> got = FromBf16(d_y.ToHost());
      EXPECT_LE(RelL2(got, want), kBf16Tol)
          << m << "x" << n << "x" << k << " " << ctx->PlanInfo(m, n, k, false, true);
    }
    EXPECT_NE((*tuned)->PlanInfo(m, n, k, false, true).find("tuned"), std::string::npos)
        << "the accumulating shape was not tuned";
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
