// Seeded device fills (kernels/random_fill.h) and backends on device-drawn random weights
// (kernels/random_weights.h), as used by rtgen-engine-bench.

#include <cmath>
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "kernels/random_fill.h"
#include "kernels/random_weights.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct Moments {
  double mean = 0.0, stddev = 0.0;
  int64_t zeros = 0, non_finite = 0;
};

Moments Measure(const std::vector<float>& v) {
  Moments m;
  double sum = 0.0, sum_sq = 0.0;
  for (float x : v) {
    if (!std::isfinite(x)) ++m.non_finite;
    if (x == 0.0f) ++m.zeros;
    sum += x;
    sum_sq += double{x} * x;
  }
  m.mean = sum / v.size();
  m.stddev = std::sqrt(sum_sq / v.size() - m.mean * m.mean);
  return m;
}

std::vector<float> FillBf16(size_t n, kernels::RandomFillParams p) {
  DeviceArray<uint16_t> d(n);  // poisoned: an unwritten element reads as NaN
  GPU_CHECK(kernels::RandomFillBf16(d.bf16(), static_cast<int64_t>(n), p, nullptr));
  return FromBf16(d.ToHost());
}

TEST(RandomFillTest, Bf16IsNormalNonZeroAndSeeded) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  const size_t n = (size_t{1} << 20) + 3;  // not a multiple of the block
  const std::vector<float> a = FillBf16(n, {seed, 5, 0.0f, 0.02f});
  const Moments m = Measure(a);
  std::printf("  bf16 fill: mean %.3g stddev %.4g\n", m.mean, m.stddev);
  EXPECT_EQ(m.non_finite, 0);
  EXPECT_EQ(m.zeros, 0);
  EXPECT_LT(std::fabs(m.mean), 5 * 0.02 / std::sqrt(double(n)));
  EXPECT_NEAR(m.stddev, 0.02, 0.02 * 0.02);
  // Roughly normal: ~68% within one sigma, ~95.4% within two.
  int64_t one = 0, two = 0;
  for (float x : a) {
    one += std::fabs(x) < 0.02f;
    two += std::fabs(x) < 0.04f;
  }
  EXPECT_NEAR(double(one) / n, 0.6827, 0.01);
  EXPECT_NEAR(double(two) / n, 0.9545, 0.01);

  EXPECT_EQ(FillBf16(n, {seed, 5, 0.0f, 0.02f}), a);  // same (seed, tensor): same values
  const std::vector<float> b = FillBf16(n, {seed, 6, 0.0f, 0.02f});
  int64_t same = 0;
  for (size_t i = 0; i < n; ++i) same += a[i] == b[i];
  EXPECT_LT(double(same) / n, 0.02);  // another tensor id draws other values
}

TEST(RandomFillTest, F32NormWeights) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  const size_t n = size_t{1} << 18;
  DeviceArray<float> d(n);
  GPU_CHECK(kernels::RandomFillF32(d.get(), static_cast<int64_t>(n), {seed, 0, 1.0f, 0.1f},
                                   nullptr));
  const Moments m = Measure(d.ToHost());
  EXPECT_EQ(m.non_finite, 0);
  EXPECT_EQ(m.zeros, 0);
  EXPECT_NEAR(m.mean, 1.0, 5 * 0.1 / std::sqrt(double(n)));
  EXPECT_NEAR(m.stddev, 0.1, 0.1 * 0.02);
  EXPECT_EQ(kernels::RandomFillF32(d.get(), 4, {seed, 0, 1.0f, 0.0f}, nullptr),
            cudaErrorInvalidValue);
  cudaGetLastError();
}

// Backends on random device weights: sizes, and identical greedy tokens from two backends of
// one seed, one replaying graphs and one eager (the bench's graph-vs-eager comparison).
void RunRandomBackend(bool tied) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  ModelConfig c = TinyConfig();
  c.tie_word_embeddings = tied;
  const int64_t h = c.hidden_size, f = c.intermediate_size, v = c.vocab_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t bf16 =
      c.num_layers * ((q + 2 * kv) * h + h * q + 3 * f * h) + (tied ? 1 : 2) * v * h;
  const int64_t f32 = c.num_layers * 2 * h + h + c.head_dim / 2;
  std::vector<std::vector<int32_t>> tokens;
  for (const bool graphs : {true, false}) {
    CudaBackendOptions o;
    o.max_num_tokens = 256;
    o.max_num_seqs = 4;
    o.max_model_len = 256;
    o.enable_cuda_graphs = graphs;
    // Step 0 (three prompts) eager on both backends, so that the tokens compare bit for bit.
    o.mixed_prefill_graphs = false;
    auto b = CreateCudaBackendWithRandomWeights(c, seed, o);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->weight_bytes(), 2 * bf16 + 4 * f32);
    ASSERT_TRUE((*b)->AllocateKvCache({32, 16}).ok());
    EXPECT_EQ((*b)->graph_buckets().empty(), !graphs);
    int32_t next_block = 0;
    std::vector<TestSeq> seqs(3);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    StepBuilder prefill(16, &next_block);
    for (int s = 0; s < 3; ++s) {
      for (int t = 0; t < 20 + s; ++t) seqs[s].tokens.push_back((s * 131 + t * 17) % v);
      prefill.Add(seqs[s], static_cast<int32_t>(seqs[s].tokens.size()), &greedy);
    }
    std::vector<int32_t> got;
    StepInput in = prefill.Build(false);
    for (int step = 0; step < 6; ++step) {
      auto out = (*b)->Execute(in);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->graph_replayed, graphs && step > 0);
      StepBuilder decode(16, &next_block);
      for (int s = 0; s < 3; ++s) {
        const int32_t t = out->sampled[s].token_id;
        ASSERT_GE(t, 0);
        ASSERT_LT(t, v);
        got.push_back(t);
        seqs[s].tokens.push_back(t);
        seqs[s].output.push_back(t);
        decode.Add(seqs[s], 1, &greedy);
      }
      in = decode.Build(true);
    }
    tokens.push_back(got);
  }
  EXPECT_EQ(tokens[0], tokens[1]);
}

TEST(RandomWeightsTest, TiedBackendGraphsMatchEager) { RunRandomBackend(true); }
TEST(RandomWeightsTest, UntiedBackendGraphsMatchEager) { RunRandomBackend(false); }

}  // namespace
}  // namespace rtgen::testing_gpu
