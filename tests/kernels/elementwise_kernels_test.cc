// Embedding, fused residual + RMSNorm, SwiGLU and KV store against CPU references.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "kernels/embedding.h"
#include "kernels/kv_store.h"
#include "kernels/rms_norm.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

constexpr double kBf16Tol = 1e-2;  // rel L2 for bf16 outputs

TEST(EmbeddingTest, GathersRowsAndZeroesBadIds) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int vocab = 1000;
  // 576, 8192: the vector path; 100 (not a multiple of 8), 8200 (above 8192): the scalar one.
  for (const int hidden : {576, 8192, 100, 8200}) {
    const std::vector<uint16_t> table =
        ToBf16(RandomNormal(size_t{1} * vocab * hidden, 1.0f, rng));
    std::vector<int32_t> ids = {0, 999, 17, -1, 1000, 512, 17};
    DeviceArray<uint16_t> d_table(table);
    DeviceArray<int32_t> d_ids(ids);
    DeviceArray<float> d_out(ids.size() * hidden);
    GPU_CHECK(kernels::Embedding({d_table.bf16(), d_ids.get(), d_out.get(),
                                  static_cast<int32_t>(ids.size()), hidden, vocab},
                                 nullptr));
    const std::vector<float> out = d_out.ToHost();
    for (size_t t = 0; t < ids.size(); ++t) {
      for (int j = 0; j < hidden; ++j) {
        const float want = ids[t] < 0 || ids[t] >= vocab
                               ? 0.0f
                               : FromBf16(table[static_cast<size_t>(ids[t]) * hidden + j]);
        ASSERT_EQ(out[t * hidden + j], want)
            << "hidden " << hidden << " token " << t << " dim " << j;
      }
    }
  }
}

struct NormShape {
  int rows;
  int hidden;
  bool add;
  bool gather;
};

class RmsNormTest : public ::testing::TestWithParam<NormShape> {};

TEST_P(RmsNormTest, MatchesReference) {
  const NormShape s = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const size_t n = size_t{1} * s.rows * s.hidden;
  const std::vector<float> residual = RandomNormal(n, 2.0f, rng);
  const std::vector<uint16_t> add = ToBf16(RandomNormal(n, 1.0f, rng));
  const std::vector<float> weight = RandomUniform(s.hidden, 0.5f, 1.5f, rng);
  std::vector<int32_t> rows(s.rows);
  std::iota(rows.begin(), rows.end(), 0);
  if (s.gather) {
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize((s.rows + 1) / 2);
  }
  const int out_rows = static_cast<int>(rows.size());
  DeviceArray<float> d_res(residual);
  DeviceArray<uint16_t> d_add(add);
  DeviceArray<float> d_w(weight);
  DeviceArray<int32_t> d_rows(rows);
  DeviceArray<uint16_t> d_out(size_t{1} * out_rows * s.hidden);
  const float eps = 1e-5f;
  GPU_CHECK(kernels::RmsNorm({d_res.get(), s.add ? d_add.bf16() : nullptr,
                              s.gather ? d_rows.get() : nullptr, d_w.get(), d_out.bf16(),
                              out_rows, s.hidden, eps},
                             nullptr));
  const std::vector<float> out = FromBf16(d_out.ToHost());
  const std::vector<float> res_out = d_res.ToHost();
  std::vector<double> want(out.size()), want_res(residual.begin(), residual.end());
  std::vector<float> got_res;
  std::vector<double> want_res_rows;
  for (int i = 0; i < out_rows; ++i) {
    const int r = rows[i];
    double ss = 0.0;
    std::vector<double> h(s.hidden);
    for (int j = 0; j < s.hidden; ++j) {
      h[j] = residual[size_t{1} * r * s.hidden + j];
      if (s.add) h[j] += FromBf16(add[size_t{1} * r * s.hidden + j]);
      // Written back only without row_index (rms_norm.h); gathered rows keep the residual.
      if (!s.gather) want_res[size_t{1} * r * s.hidden + j] = h[j];
      ss += h[j] * h[j];
    }
    const double inv = 1.0 / std::sqrt(ss / s.hidden + eps);
    for (int j = 0; j < s.hidden; ++j) {
      want[size_t{1} * i * s.hidden + j] = h[j] * inv * weight[j];
      got_res.push_back(res_out[size_t{1} * r * s.hidden + j]);
      want_res_rows.push_back(want_res[size_t{1} * r * s.hidden + j]);
    }
  }
  EXPECT_LE(RelL2(out, want), kBf16Tol);
  EXPECT_LE(RelL2(got_res, want_res_rows), 1e-6);  // fp32 residual update (or none)
}

// The final norm of a prefill graph whose padding rows all read row 0 (step_fill.cc PadSeqs):
// every output row is row 0 plus `add` once, however its blocks interleave, and the residual is
// left as it was. Before, each block wrote the row back, and a block that read after another's
// write added `add` twice.
TEST(RmsNormGatherTest, RepeatedRowsAddOnce) {
  for (const int hidden : {576, 1002}) {  // the vector and the scalar path
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const int rows = 600;  // several waves of blocks on one row
    const std::vector<float> residual = RandomNormal(hidden, 2.0f, rng);
    const std::vector<uint16_t> add = ToBf16(RandomNormal(hidden, 1.0f, rng));
    const std::vector<float> weight = RandomUniform(hidden, 0.5f, 1.5f, rng);
    DeviceArray<float> d_res(residual);
    DeviceArray<uint16_t> d_add(add);
    DeviceArray<float> d_w(weight);
    DeviceArray<int32_t> d_rows(std::vector<int32_t>(rows, 0));
    DeviceArray<uint16_t> d_out(size_t{1} * rows * hidden);
    const float eps = 1e-5f;
    GPU_CHECK(kernels::RmsNorm(
        {d_res.get(), d_add.bf16(), d_rows.get(), d_w.get(), d_out.bf16(), rows, hidden, eps},
        nullptr));
    const std::vector<uint16_t> out = d_out.ToHost();
    std::vector<double> h(hidden), want(hidden);
    double ss = 0.0;
    for (int j = 0; j < hidden; ++j) {
      h[j] = residual[j] + FromBf16(add[j]);
      ss += h[j] * h[j];
    }
    for (int j = 0; j < hidden; ++j) want[j] = h[j] / std::sqrt(ss / hidden + eps) * weight[j];
    for (int i = 0; i < rows; ++i) {
      const std::vector<uint16_t> row(out.begin() + size_t{1} * i * hidden,
                                      out.begin() + size_t{1} * (i + 1) * hidden);
      ASSERT_LE(RelL2(FromBf16(row), want), kBf16Tol) << "hidden " << hidden << " row " << i;
      ASSERT_TRUE(std::equal(row.begin(), row.end(), out.begin())) << "row " << i;
    }
    EXPECT_EQ(d_res.ToHost(), residual);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(NormShape{1, 64, false, false},
                                           NormShape{7, 576, true, false},
                                           NormShape{33, 2048, true, true},
                                           NormShape{5, 4096, false, true},
                                           NormShape{300, 1000, true, false},
                                           NormShape{2, 8192, true, false},
                                           // Scalar path: hidden % 4 != 0, hidden > 8192.
                                           NormShape{3, 1002, true, true},
                                           NormShape{2, 8196, true, false}));

TEST(SiluMulTest, MatchesReference) {
  for (auto [tokens, inter] : {std::pair{1, 1536}, std::pair{9, 8192}, std::pair{40, 100}}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const std::vector<uint16_t> in = ToBf16(RandomNormal(size_t{2} * tokens * inter, 2.0f, rng));
    DeviceArray<uint16_t> d_in(in);
    DeviceArray<uint16_t> d_out(size_t{1} * tokens * inter);
    GPU_CHECK(kernels::SiluMul({d_in.bf16(), d_out.bf16(), tokens, inter}, nullptr));
    const std::vector<float> out = FromBf16(d_out.ToHost());
    std::vector<double> want(out.size());
    for (int t = 0; t < tokens; ++t) {
      for (int i = 0; i < inter; ++i) {
        const double g = FromBf16(in[size_t{2} * t * inter + i]);
        const double u = FromBf16(in[size_t{2} * t * inter + inter + i]);
        want[size_t{1} * t * inter + i] = g / (1.0 + std::exp(-g)) * u;
      }
    }
    EXPECT_LE(RelL2(out, want), kBf16Tol) << tokens << "x" << inter;
  }
}

TEST(KvStoreTest, WritesSlotsAndSkipsPadding) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int num_blocks = 8, block_size = 16, kv_heads = 3, head_dim = 64;
  const int kv_dim = kv_heads * head_dim, stride = 9 * head_dim + 2 * kv_dim, tokens = 20;
  std::vector<int32_t> slots(num_blocks * block_size);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);
  slots[3] = slots[11] = -1;
  const std::vector<uint16_t> rows = ToBf16(RandomNormal(size_t{1} * tokens * stride, 1.0f, rng));
  const size_t cache_elems = size_t{1} * num_blocks * block_size * kv_dim;
  DeviceArray<uint16_t> d_rows(rows);
  DeviceArray<int32_t> d_slots(slots);
  DeviceArray<uint16_t> d_k(cache_elems), d_v(cache_elems);  // poisoned 0xffff
  const int k_off = 9 * head_dim, v_off = k_off + kv_dim;
  GPU_CHECK(kernels::KvStore({d_rows.bf16() + k_off, d_rows.bf16() + v_off, stride, d_k.bf16(),
                              d_v.bf16(), d_slots.get(), tokens, kv_dim},
                             nullptr));
  const std::vector<uint16_t> k = d_k.ToHost(), v = d_v.ToHost();
  std::vector<bool> written(num_blocks * block_size, false);
  for (int t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    written[slots[t]] = true;
    for (int i = 0; i < kv_dim; ++i) {
      ASSERT_EQ(k[size_t{1} * slots[t] * kv_dim + i], rows[size_t{1} * t * stride + k_off + i]);
      ASSERT_EQ(v[size_t{1} * slots[t] * kv_dim + i], rows[size_t{1} * t * stride + v_off + i]);
    }
  }
  for (int s = 0; s < num_blocks * block_size; ++s) {
    if (written[s]) continue;
    for (int i = 0; i < kv_dim; ++i) {
      ASSERT_EQ(k[size_t{1} * s * kv_dim + i], 0xffff) << "slot " << s << " was written";
      ASSERT_EQ(v[size_t{1} * s * kv_dim + i], 0xffff) << "slot " << s << " was written";
    }
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
