#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

// Samples once from a copy of `logits` (SampleToken modifies its input).
SampledToken Sample(std::vector<float> logits, const SamplingParams& p, uint64_t seed,
                    std::span<const int32_t> prompt = {}, std::span<const int32_t> output = {}) {
  return SampleToken(logits, p, prompt, output, seed);
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / temperature);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(CounterUniformTest, InUnitIntervalDeterministicAndSpread) {
  double sum = 0;
  std::set<float> distinct;
  for (uint64_t c = 0; c < 10000; ++c) {
    float u = CounterUniform(42, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    EXPECT_EQ(u, CounterUniform(42, c));
    sum += u;
    distinct.insert(u);
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_GT(distinct.size(), 9900u);
  EXPECT_NE(CounterUniform(1, 0), CounterUniform(2, 0));
}

TEST(SamplerTest, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(Sample({0.1f, 3.0f, -1.0f, 2.0f}, p, 1).token_id, 1);
  EXPECT_EQ(Sample({0.1f, 3.0f, -1.0f, 3.0f}, p, 1).token_id, 1);
  EXPECT_EQ(Sample({5.0f, 5.0f}, p, 7).token_id, 0);
}

// A NaN logit (a model's overflow) counts as -inf, as on the device (kernels/sampling.cu): never
// the argmax, drawn or listed, and no NaN in the logprobs of the others. With NaN in them the
// sorts' comparisons were no strict weak order (undefined behaviour: std::sort may read past the
// range), and a NaN at id 0 was the greedy token.
TEST(SamplerTest, NanLogitsCountAsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = 3;
  const SampledToken g = Sample({nan, 1.0f, 2.0f, nan}, greedy, 1);
  EXPECT_EQ(g.token_id, 2);
  EXPECT_NEAR(g.logprob, 2.0f - std::log(std::exp(1.0) + std::exp(2.0)), 1e-6);
  ASSERT_EQ(g.top.size(), 3u);
  EXPECT_EQ(g.top[0].token_id, 2);
  EXPECT_EQ(g.top[1].token_id, 1);
  EXPECT_EQ(g.top[2].logprob, -std::numeric_limits<float>::infinity());
  // Every sampler path, over a large row with NaN at every 7th id: never a NaN id.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(5000);
  for (size_t i = 0; i < row.size(); ++i) row[i] = i % 7 == 0 ? nan : normal(rng);
  const std::vector<std::tuple<int32_t, float, float>> filters = {
      {0, 1.0f, 0.0f}, {50, 1.0f, 0.0f}, {0, 0.9f, 0.0f}, {0, 1.0f, 0.05f}, {40, 0.8f, 0.1f}};
  for (const auto& [top_k, top_p, min_p] : filters) {
    SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    for (uint64_t seed = 0; seed < 50; ++seed) {
      const SampledToken t = Sample(row, p, seed);
      EXPECT_NE(t.token_id % 7, 0) << top_k << " " << top_p << " " << min_p << " seed " << seed;
      EXPECT_TRUE(std::isfinite(t.logprob));
    }
  }
  // Nothing but NaN (or -inf): id 0, greedy or sampled (a sampled row drew the last id).
  EXPECT_EQ(Sample({nan, nan, nan}, greedy, 1).token_id, 0);
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  const float inf = std::numeric_limits<float>::infinity();
  for (uint64_t seed = 0; seed < 8; ++seed) {
    EXPECT_EQ(Sample({nan, nan, nan}, sampled, seed).token_id, 0) << seed;
    EXPECT_EQ(Sample({-inf, -inf, -inf}, sampled, seed).token_id, 0) << seed;
    sampled.top_k = 2;
    sampled.top_p = 0.5f;
    EXPECT_EQ(Sample({nan, -inf, nan}, sampled, seed).token_id, 0) << seed;
    sampled.top_k = 0;
    sampled.top_p = 1.0f;
  }
}

// A +inf logit (a model's overflow) takes all the mass, shared evenly with any other +inf, as on
// the device: before, exp(inf - inf) made every weight, lse and logprob NaN, and a sampled row
// drew the last id whatever its logit.
TEST(SamplerTest, PlusInfinityLogitsTakeAllTheMass) {
  const float inf = std::numeric_limits<float>::infinity();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = 3;
  const SampledToken g = Sample({1.0f, inf, 2.0f, inf}, greedy, 1);
  EXPECT_EQ(g.token_id, 1);
  EXPECT_EQ(g.logprob, 0.0f);
  ASSERT_EQ(g.top.size(), 3u);
  EXPECT_EQ(g.top[0].token_id, 1);
  EXPECT_EQ(g.top[1].token_id, 3);
  EXPECT_EQ(g.top[2].token_id, 2);
  EXPECT_LT(g.top[2].logprob, -1e38f);  // no mass left beside the +inf ones
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(3000);
  for (float& l : row) l = normal(rng);
  row[1234] = inf;
  const std::vector<std::tuple<int32_t, float, float>> filters = {
      {0, 1.0f, 0.0f}, {50, 1.0f, 0.0f}, {0, 0.9f, 0.0f}, {0, 1.0f, 0.05f}, {40, 0.8f, 0.1f}};
  for (const auto& [top_k, top_p, min_p] : filters) {
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = 1.3f;  // inf / 1.3 is still inf
    const std::vector<int32_t> prompt = {1234, 5};
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const SampledToken t = Sample(row, p, seed, prompt);
      EXPECT_EQ(t.token_id, 1234) << top_k << " " << top_p << " " << min_p << " seed " << seed;
      EXPECT_EQ(t.logprob, 0.0f);
    }
  }
  // Two +inf ids share the draw; nothing else is drawn.
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  std::set<int32_t> drawn;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    const SampledToken t = Sample({3.0f, inf, 5.0f, inf}, sampled, seed);
    EXPECT_TRUE(t.token_id == 1 || t.token_id == 3) << t.token_id;
    EXPECT_TRUE(std::isfinite(t.logprob));
    drawn.insert(t.token_id);
  }
  EXPECT_EQ(drawn.size(), 2u);
  // A finite logit scaled past the float range (3e38 at temperature 0.5) is +inf too.
  sampled.temperature = 0.5f;
  const SampledToken scaled = Sample({1.0f, 3e38f, 0.0f}, sampled, 4);
  EXPECT_EQ(scaled.token_id, 1);
  EXPECT_EQ(scaled.logprob, 0.0f);
}

TEST(SamplerTest, TinyTemperatureIsGreedyWithAFiniteLogprob) {
  // 1 / 1e-38 overflowed every logit above ~3.4 to inf: the draw took the last of them (2 here)
  // and the logprob was NaN. Below the greedy bound the argmax is taken, its logprob unscaled.
  SamplingParams p;
  p.temperature = 1e-38f;
  const SampledToken t = Sample({10.0f, 5.0f, 4.0f}, p, 3);
  EXPECT_EQ(t.token_id, 0);
  ASSERT_TRUE(std::isfinite(t.logprob));
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(t.logprob, Sample({10.0f, 5.0f, 4.0f}, greedy, 3).logprob);
}

TEST(SamplerTest, TopKCandidatesAreDrawnBestFirst) {
  // Top-k without top-p (alone or with min-p) drew its candidates in its heap's order; the
  // device draws them best first (logit descending, lowest id first), so the same seed gave
  // another token. The reference walks the k best in that order.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(50);
  for (float& l : logits) l = normal(rng);
  for (float min_p : {0.0f, 0.05f}) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 10;
    p.min_p = min_p;
    std::vector<int32_t> best(logits.size());
    std::iota(best.begin(), best.end(), 0);
    std::sort(best.begin(), best.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    best.resize(10);
    const float top = logits[best[0]];
    std::erase_if(best, [&](int32_t id) { return logits[id] < top + std::log(min_p); });
    for (uint64_t seed = 0; seed < 300; ++seed) {
      double total = 0;
      for (int32_t id : best) total += std::exp(logits[id] - top);
      const double target = CounterUniform(seed, 0) * total;
      double cum = 0;
      int32_t expected = best.back();
      for (int32_t id : best) {
        cum += std::exp(logits[id] - top);
        if (cum > target) {
          expected = id;
          break;
        }
      }
      ASSERT_EQ(Sample(logits, p, seed).token_id, expected) << "seed " << seed << ", min_p "
                                                            << min_p;
    }
  }
}

TEST(SamplerTest, TopK1EqualsGreedy) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 3);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams k1;
  k1.temperature = 1.5f;
  k1.top_k = 1;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<float> l(500);
    for (float& v : l) v = n(rng);
    EXPECT_EQ(Sample(l, k1, seed).token_id, Sample(l, greedy, seed).token_id);
  }
}

TEST(SamplerTest, TopKDrawsOnlyFromTopK) {
  std::vector<float> l = {1.0f, 4.0f, 3.9f, 0.5f, 3.8f, 2.0f};  // top-3: ids 1, 2, 4
  SamplingParams p;
  p.top_k = 3;
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 500; ++seed) seen.insert(Sample(l, p, seed).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 4}));
}

TEST(SamplerTest, TopPKeepsSmallestNucleus) {
  std::vector<float> l = LogitsOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.top_p = 0.7f;
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 500; ++seed) seen.insert(Sample(l, p, seed).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  p.top_p = 0.9f;
  seen.clear();
  for (uint64_t seed = 0; seed < 500; ++seed) seen.insert(Sample(l, p, seed).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTest, TopPOnLargeVocabMatchesFullSortNucleus) {
  const int vocab = 50000;
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0, 2);
  std::vector<float> l(vocab);
  for (float& v : l) v = n(rng);
  const float top_p = 0.5f;
  // Reference nucleus by a full sort.
  std::vector<double> probs = Softmax(l);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  std::set<int32_t> nucleus;
  double cum = 0;
  for (int32_t id : order) {
    nucleus.insert(id);
    cum += probs[id];
    if (cum >= top_p) break;
  }
  ASSERT_GT(nucleus.size(), 100u);  // exercises the growing partial selection
  SamplingParams p;
  p.top_p = top_p;
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    int32_t t = Sample(l, p, seed).token_id;
    EXPECT_TRUE(nucleus.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 50u);
}

TEST(SamplerTest, MinPFiltersRelativeToMax) {
  std::vector<float> l = LogitsOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.min_p = 0.4f;  // keeps p >= 0.2
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 500; ++seed) seen.insert(Sample(l, p, seed).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  p.min_p = 0.0f;
  seen.clear();
  for (uint64_t seed = 0; seed < 500; ++seed) seen.insert(Sample(l, p, seed).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTest, RepetitionPenaltyHfStyleOncePerDistinctToken) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 3.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  std::vector<int32_t> prompt = {0, 1, 0};
  std::vector<int32_t> output = {1, 0};
  SampleToken(l, p, prompt, output, 0);
  EXPECT_FLOAT_EQ(l[0], 1.0f);   // positive: divided once
  EXPECT_FLOAT_EQ(l[1], -4.0f);  // negative: multiplied once
  EXPECT_FLOAT_EQ(l[2], 1.0f);   // unseen: unchanged
  EXPECT_FLOAT_EQ(l[3], 3.0f);
}

TEST(SamplerTest, PresenceAndFrequencyOverOutputOnly) {
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<int32_t> prompt = {3, 3, 3};
  std::vector<int32_t> output = {1, 2, 1, 1};
  SampledToken t = SampleToken(l, p, prompt, output, 0);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 0.75f);
  EXPECT_FLOAT_EQ(l[2], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[3], 1.0f);  // prompt tokens are not penalised
  EXPECT_EQ(t.token_id, 0);
}

TEST(SamplerTest, PenaltiesLowerRepeatedTokenFrequency) {
  std::vector<float> l = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int32_t> output = {2, 2};
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  int count_plain = 0, count_penalised = 0;
  SamplingParams plain;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    count_plain += Sample(l, plain, seed, {}, output).token_id == 2;
    count_penalised += Sample(l, p, seed, {}, output).token_id == 2;
  }
  EXPECT_GT(count_plain, 400);
  EXPECT_LT(count_penalised, count_plain / 3);
}

TEST(SamplerTest, SeedsReproduceAndDiffer) {
  std::vector<float> l(100, 0.0f);
  SamplingParams p;
  std::vector<int32_t> a, b, c;
  std::vector<int32_t> output;
  for (int i = 0; i < 30; ++i) {
    output.assign(i, 0);  // the counter is output.size()
    a.push_back(Sample(l, p, 1234, {}, output).token_id);
    b.push_back(Sample(l, p, 1234, {}, output).token_id);
    c.push_back(Sample(l, p, 999, {}, output).token_id);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 10u);  // the counter advances draws
}

TEST(SamplerTest, EmpiricalFrequenciesMatchSoftmax) {
  std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    std::vector<double> expected = Softmax(l, temperature);
    std::vector<int> counts(l.size());
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++counts[Sample(l, p, 1000 + i).token_id];
    for (size_t k = 0; k < l.size(); ++k) {
      // 4.5 standard deviations of a binomial proportion.
      double tol = 4.5 * std::sqrt(expected[k] * (1 - expected[k]) / n) + 1e-3;
      EXPECT_NEAR(counts[k] / double(n), expected[k], tol) << "token " << k << " T " << temperature;
    }
  }
}

TEST(SamplerTest, LogprobsAreLogSoftmaxOfProcessedLogits) {
  std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  SamplingParams p;
  p.temperature = 2.0f;
  p.logprobs = 3;
  p.top_k = 2;  // filtering does not change the reported distribution
  SampledToken t = Sample(l, p, 5);
  std::vector<double> probs = Softmax(l, 2.0);
  EXPECT_NEAR(t.logprob, std::log(probs[t.token_id]), 1e-5);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].token_id, 2);
  EXPECT_EQ(t.top[1].token_id, 0);
  EXPECT_EQ(t.top[2].token_id, 4);
  for (const TokenLogprob& e : t.top) EXPECT_NEAR(e.logprob, std::log(probs[e.token_id]), 1e-5);

  SamplingParams g;
  g.temperature = 0.0f;
  g.logprobs = 1;
  SampledToken gt = Sample(l, g, 5);
  std::vector<double> p1 = Softmax(l, 1.0);
  EXPECT_EQ(gt.token_id, 2);
  EXPECT_NEAR(gt.logprob, std::log(p1[2]), 1e-5);
  EXPECT_NEAR(gt.top[0].logprob, std::log(p1[2]), 1e-5);
}

}  // namespace
}  // namespace rtgen
