// Device sampling vs the CPU sampler (engine/sampling/sampler.h) on identical fp32 logits.

#include <algorithm>
#include <cstring>
#include <numeric>

#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

TEST(SamplingTest, CounterUniformMatchesHostBitForBit) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int n = 100000;
  std::vector<uint64_t> seeds(n), counters(n);
  for (int i = 0; i < n; ++i) {
    seeds[i] = rng();
    counters[i] = i % 7 == 0 ? rng() : static_cast<uint64_t>(i);
  }
  DeviceArray<uint64_t> d_seeds(seeds), d_counters(counters);
  DeviceArray<float> d_out(n);
  GPU_CHECK(kernels::CounterUniformBatch(d_seeds.get(), d_counters.get(), d_out.get(), n, nullptr));
  const std::vector<float> out = d_out.ToHost();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], CounterUniform(seeds[i], counters[i])) << i;
}

// Runs the device sampler on `rows` rows of logits with one params per row, greedy rows reduced
// by `splits` blocks each; the split counters must come back to zero.
void SampleOnDevice(const std::vector<float>& logits, int vocab,
                    const std::vector<kernels::SampleRowParams>& params, int splits,
                    std::vector<int32_t>* tokens, std::vector<float>* logprobs) {
  const int rows = static_cast<int>(params.size());
  DeviceArray<float> d_logits(logits);
  DeviceArray<kernels::SampleRowParams> d_params(params);
  DeviceArray<int32_t> d_tokens(rows);
  DeviceArray<float> d_logprobs(rows);
  DeviceArray<uint8_t> d_states(size_t{1} * rows * splits * kernels::kSampleSplitStateBytes);
  const std::vector<int32_t> zeros(rows, 0);
  DeviceArray<int32_t> d_counters(zeros);
  kernels::SampleTokensParams p{d_logits.get(), vocab,          d_params.get(), d_tokens.get(),
                                d_logprobs.get(), rows,          vocab};
  p.splits = splits;
  p.split_states = d_states.get();
  p.split_counters = d_counters.get();
  GPU_CHECK(kernels::SampleTokens(p, nullptr));
  *tokens = d_tokens.ToHost();
  *logprobs = d_logprobs.ToHost();
  EXPECT_EQ(d_counters.ToHost(), zeros);
}

struct Config {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  bool order_matches_cpu;  // false: lone top-k (the CPU draws in nth_element order)
};

TEST(SamplingTest, MatchesCpuSampler) {
  const std::vector<Config> configs = {
      {0.0f, 0, 1.0f, 0.0f, true},    {1.0f, 0, 1.0f, 0.0f, true},
      {0.7f, 0, 0.9f, 0.0f, true},    {0.8f, 50, 0.95f, 0.0f, true},
      {1.0f, 0, 1.0f, 0.05f, true},   {1.3f, 0, 0.5f, 0.1f, true},
      {1.0f, 40, 1.0f, 0.0f, false},  {0.9f, 1, 1.0f, 0.0f, true}};
  // 1001: rows not 16-byte aligned (the scalar loads, split or not).
  for (int vocab : {1000, 1001, 49152}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const int rows_per_config = 16;
    std::vector<kernels::SampleRowParams> params;
    std::vector<SamplingParams> host_params;
    for (const Config& c : configs) {
      for (int r = 0; r < rows_per_config; ++r) {
        kernels::SampleRowParams p;
        p.temperature = c.temperature;
        p.top_k = c.top_k;
        p.top_p = c.top_p;
        p.min_p = c.min_p;
        p.seed = rng();
        p.counter = rng() % 1000;
        params.push_back(p);
        SamplingParams h;
        h.temperature = c.temperature;
        h.top_k = c.top_k;
        h.top_p = c.top_p;
        h.min_p = c.min_p;
        host_params.push_back(h);
      }
    }
    const int rows = static_cast<int>(params.size());
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    // A tie at the maximum of row 0: greedy must take the lower id.
    const auto row0 = logits.begin();
    const float top = *std::max_element(row0, row0 + vocab) + 1.0f;
    logits[7] = logits[vocab - 3] = top;
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", greedy splits " << splits);
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs);
      EXPECT_EQ(tokens[0], 7);  // the tied ids lie in different parts when split
      int mismatches = 0;
      for (int r = 0; r < rows; ++r) {
        const Config& c = configs[r / rows_per_config];
        std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                               logits.begin() + size_t{1} * (r + 1) * vocab);
        // Only its size (the counter) matters.
        std::vector<int32_t> fake_output(params[r].counter, 0);
        const SampledToken cpu = SampleToken(row, host_params[r], {}, fake_output, params[r].seed);
        if (c.order_matches_cpu) {
          if (tokens[r] != cpu.token_id) ++mismatches;
          EXPECT_EQ(tokens[r], cpu.token_id) << "row " << r << " config " << r / rows_per_config;
          EXPECT_NEAR(logprobs[r], cpu.logprob, 1e-3) << "row " << r;
        } else {
          // Same candidate set: the token must be among the top_k logits.
          std::vector<float> sorted(row);
          std::nth_element(sorted.begin(), sorted.begin() + (c.top_k - 1), sorted.end(),
                           std::greater<>());
          EXPECT_GE(row[tokens[r]], sorted[c.top_k - 1]) << "row " << r;
        }
      }
      EXPECT_EQ(mismatches, 0);
      // Same seeds and counters: the same tokens again.
      std::vector<int32_t> again;
      SampleOnDevice(logits, vocab, params, splits, &again, &logprobs);
      EXPECT_EQ(again, tokens);
    }
  }
}

// Greedy edge cases, unsplit and split: a row of -inf only gives id 0; ties inside one float4 and
// inside one thread's batch of loads go to the lower id; a maximum at the last id (the scalar tail
// when rows are not 16-byte aligned) is found; logprobs match the CPU and repeat bit for bit.
TEST(SamplingTest, GreedyEdgeCases) {
  for (int vocab : {1000, 1001, 49152}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const int rows = 4;
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    const auto row = [&](int r) { return logits.begin() + size_t{1} * r * vocab; };
    std::fill(row(0), row(0) + vocab, -INFINITY);
    const float top = 100.0f;
    row(1)[4] = row(1)[5] = top;                 // one float4 of one thread
    row(2)[vocab - 1] = top;                     // the last id
    row(3)[9] = top;                             // ids 9 and 9 + 4 * 512: one thread's batch
    if (vocab > 9 + 4 * 512) row(3)[9 + 4 * 512] = top;
    const std::vector<kernels::SampleRowParams> params(rows);  // greedy
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", greedy splits " << splits);
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs);
      EXPECT_EQ(tokens, (std::vector<int32_t>{0, 4, vocab - 1, 9}));
      SamplingParams greedy;
      greedy.temperature = 0.0f;
      for (int r = 1; r < rows; ++r) {
        std::vector<float> host(row(r), row(r) + vocab);
        EXPECT_NEAR(logprobs[r], SampleToken(host, greedy, {}, {}, 0).logprob, 1e-3) << r;
      }
      std::vector<int32_t> again;
      std::vector<float> logprobs_again;
      SampleOnDevice(logits, vocab, params, splits, &again, &logprobs_again);
      EXPECT_EQ(again, tokens);
      for (int r = 1; r < rows; ++r) {
        EXPECT_EQ(std::memcmp(&logprobs[r], &logprobs_again[r], sizeof(float)), 0) << r;
      }
    }
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
