#include "tests/kernels/graph_pair.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {

Pair MakePair(const ModelConfig& c, uint64_t seed, std::vector<int32_t> tokens, bool mixed) {
  Pair p;
  p.graph = MakeCudaBackend(c, seed, {.graphs = true, .num_blocks = kPairBlocks,
                                      .graph_batch_sizes = {1},
                                      .prefill_graph_tokens = std::move(tokens),
                                      .mixed_prefill_graphs = mixed});
  p.eager = MakeCudaBackend(c, seed, {.graphs = false, .num_blocks = kPairBlocks});
  return p;
}

void ExpectDecodeLogits(Pair& p, const ModelConfig& c, TestSeq& g, TestSeq& e,
                        std::mt19937_64& rng, double max_rel_l2) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  for (int step = 0; step < 3; ++step) {
    const int32_t t = tok(rng);
    g.tokens.push_back(t);
    e.tokens.push_back(t);
    StepBuilder bg(kTestBlockSize, &p.next[0]), be(kTestBlockSize, &p.next[1]);
    bg.Add(g, 1, &greedy);
    be.Add(e, 1, &greedy);
    const int64_t replays = p.graph->decode_graph_replays();
    auto lg = p.graph->ComputeLogits(bg.Build(true));
    auto le = p.eager->ComputeLogits(be.Build(true));
    ASSERT_TRUE(lg.ok() && le.ok());
    // The graph side replayed its decode graph (eager against eager would match bit for bit).
    ASSERT_EQ(p.graph->decode_graph_replays(), replays + 1) << "decode step " << step;
    ASSERT_EQ(p.eager->decode_graph_replays(), 0) << "decode step " << step;
    ASSERT_EQ(lg->size(), le->size());
    if (max_rel_l2 == 0.0) {
      // Bitwise equal, and finite: NaN on both sides would compare equal.
      for (const float v : *lg) ASSERT_TRUE(std::isfinite(v)) << "decode step " << step;
      EXPECT_EQ(std::memcmp(lg->data(), le->data(), lg->size() * sizeof(float)), 0)
          << "decode step " << step;
    } else {
      EXPECT_LE(RelL2(*lg, *le), max_rel_l2) << "decode step " << step;
    }
  }
}

SamplingParams RichParams() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.3f;
  p.logprobs = 5;
  return p;
}

void ExpectSameSample(const SampledToken& g, const SampledToken& e, float tolerance) {
  const auto expect_logprob = [tolerance](float a, float b) {
    if (tolerance == 0.0f) {
      EXPECT_EQ(a, b);
    } else {
      EXPECT_NEAR(a, b, tolerance);
    }
  };
  EXPECT_EQ(g.token_id, e.token_id);
  expect_logprob(g.logprob, e.logprob);
  ASSERT_EQ(g.top.size(), e.top.size());
  for (size_t j = 0; j < g.top.size(); ++j) {
    SCOPED_TRACE(::testing::Message() << "top " << j);
    EXPECT_EQ(g.top[j].token_id, e.top[j].token_id);
    expect_logprob(g.top[j].logprob, e.top[j].logprob);
  }
}

void ExpectSameSamples(const StepOutput& g, const StepOutput& e) {
  ASSERT_EQ(g.sampled.size(), e.sampled.size());
  for (size_t i = 0; i < g.sampled.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameSample(g.sampled[i], e.sampled[i]);
  }
}

void ExpectCloseSamples(const StepOutput& g, const StepOutput& e) {
  ASSERT_EQ(g.sampled.size(), e.sampled.size());
  for (size_t i = 0; i < g.sampled.size(); ++i) {
    SCOPED_TRACE(i);
    const SampledToken& a = g.sampled[i];
    const SampledToken& b = e.sampled[i];
    EXPECT_NEAR(a.logprob, b.logprob, kPaddedLogprob);
    ASSERT_EQ(a.top.size(), 5u);
    ASSERT_EQ(b.top.size(), 5u);
    int common = 0;
    for (const TokenLogprob& x : a.top) {
      for (const TokenLogprob& y : b.top) common += x.token_id == y.token_id;
    }
    EXPECT_GE(common, 3);
    for (int j = 0; j < 5; ++j) {
      EXPECT_NEAR(a.top[j].logprob, b.top[j].logprob, kPaddedLogprob) << j;
    }
  }
}

}  // namespace rtgen::testing_gpu
