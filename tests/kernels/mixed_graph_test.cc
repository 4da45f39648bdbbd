// Multi-sequence prefill graphs (cuda_backend.h mixed_prefill_graphs): a step of several
// sequences' chunks, decode rows among them, replays the graph of its token bucket captured for
// the smallest sequence count that holds it. At a bucket's exact sizes (tokens and sequences,
// every sequence sampled) the replay is bitwise equal to the eager step, the keys it stored
// included; padded, it agrees within bf16 tolerance; steps past the buckets, or whose padding
// costs more than the launches it saves (PrefillPaddingPays), run eagerly.

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/graph_runner.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/graph_pair.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {
namespace {

// One step built twice, for the graph backend's sequences and the eager one's.
struct TwinStep {
  StepBuilder g, e;
  explicit TwinStep(Pair& p) : g(kTestBlockSize, &p.next[0]), e(kTestBlockSize, &p.next[1]) {}
  void Add(TestSeq& sg, TestSeq& se, int32_t count, const SamplingParams* params) {
    g.Add(sg, count, params);
    e.Add(se, count, params);
  }
};

// Runs the twin step on both backends; expects the graph one to replay `bucket` (0: eager) and
// both to sample `samples` rows.
std::pair<StepOutput, StepOutput> RunTwin(Pair& p, TwinStep& step, int32_t bucket,
                                         size_t samples) {
  absl::StatusOr<StepOutput> og = p.graph->Execute(step.g.Build(false));
  absl::StatusOr<StepOutput> oe = p.eager->Execute(step.e.Build(false));
  EXPECT_TRUE(og.ok()) << og.status();
  EXPECT_TRUE(oe.ok()) << oe.status();
  if (!og.ok() || !oe.ok()) return {};
  EXPECT_EQ(og->graph_replayed, bucket > 0);
  EXPECT_EQ(og->graph_bucket, bucket);
  EXPECT_FALSE(oe->graph_replayed);
  EXPECT_EQ(og->sampled.size(), samples);
  EXPECT_EQ(oe->sampled.size(), samples);
  return {*std::move(og), *std::move(oe)};
}

// New sequences of the given prompt lengths, the same on both sides.
void NewSeqs(const ModelConfig& c, std::mt19937_64& rng, const std::vector<int>& lengths,
             std::vector<TestSeq>* g, std::vector<TestSeq>* e) {
  for (const int n : lengths) {
    TestSeq s;
    s.tokens = RandomTokens(c, n, rng);
    s.seed = 500 + g->size();
    g->push_back(s);
    e->push_back(std::move(s));
  }
}

// Exact sizes: two prompts of 10 and 6 tokens (16 tokens, 2 sequences); then three sequences
// prefilled by exact 16-token chunks decoding one token each beside a 13-token prompt (16
// tokens, 4 sequences). Every sequence sampled with every device sampling feature.
TEST(MixedGraphTest, ExactSizesAreBitwiseEqualToEager) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 48, 64});
  ASSERT_TRUE(p.graph && p.eager);
  EXPECT_GT(p.graph->mixed_graph_count(), 0u);
  const SamplingParams params = RichParams();
  std::vector<TestSeq> g, e;
  NewSeqs(c, rng, {10, 6}, &g, &e);
  {
    TwinStep step(p);
    step.Add(g[0], e[0], 10, &params);
    step.Add(g[1], e[1], 6, &params);
    auto [og, oe] = RunTwin(p, step, 16, 2);
    ExpectSameSamples(og, oe);
  }
  NewSeqs(c, rng, {16, 16, 16, 13}, &g, &e);
  for (int i = 2; i < 5; ++i) {  // one prefill graph each, exact: bitwise (prefill_graph_test)
    TwinStep step(p);
    step.Add(g[i], e[i], 16, &params);
    auto [og, oe] = RunTwin(p, step, 16, 1);
    ExpectSameSamples(og, oe);
    ASSERT_FALSE(og.sampled.empty());
    for (auto* v : {&g, &e}) {
      (*v)[i].tokens.push_back(og.sampled[0].token_id);
      (*v)[i].output.push_back(og.sampled[0].token_id);
    }
  }
  {
    TwinStep step(p);
    for (int i = 2; i < 5; ++i) step.Add(g[i], e[i], 1, &params);
    step.Add(g[5], e[5], 13, &params);
    auto [og, oe] = RunTwin(p, step, 16, 4);
    ExpectSameSamples(og, oe);
  }
  // The keys every step stored, read by later decode steps.
  for (const int i : {0, 1, 3, 5}) {
    SCOPED_TRACE(i);
    ExpectDecodeLogits(p, c, g[i], e[i], rng, 0.0);
  }
}

// Padded: three prompts of 5, 7 and 30 tokens (42 -> 48 tokens, 3 -> 4 sequences); a decode row
// beside a chunk that is not its prompt's last (no sample: 21 -> 32 tokens, 1 -> 2 logits rows),
// then beside that prompt's last chunk. Within bf16 tolerance (graph_pair.h kPaddedRelL2,
// kPaddedLogprob).
TEST(MixedGraphTest, PaddedStepsMatchEager) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 32, 48});
  ASSERT_TRUE(p.graph && p.eager);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = 5;
  std::vector<TestSeq> g, e;
  NewSeqs(c, rng, {5, 7, 30, 25}, &g, &e);
  {
    TwinStep step(p);
    for (int i = 0; i < 3; ++i) step.Add(g[i], e[i], static_cast<int>(g[i].tokens.size()),
                                         &greedy);
    auto [og, oe] = RunTwin(p, step, 48, 3);
    ExpectCloseSamples(og, oe);
    // Both sides go on with the graph side's tokens (the eager side's may differ).
    for (int i = 0; i < 3 && i < static_cast<int>(og.sampled.size()); ++i) {
      g[i].tokens.push_back(og.sampled[i].token_id);
      e[i].tokens.push_back(og.sampled[i].token_id);
    }
  }
  {
    TwinStep step(p);
    step.Add(g[0], e[0], 1, &greedy);
    step.Add(g[3], e[3], 20, nullptr);
    auto [og, oe] = RunTwin(p, step, 32, 1);
    ExpectCloseSamples(og, oe);
    const int32_t next = og.sampled.empty() ? 0 : og.sampled[0].token_id;
    g[0].tokens.push_back(next);
    e[0].tokens.push_back(next);
  }
  {
    TwinStep step(p);
    step.Add(g[0], e[0], 1, &greedy);
    step.Add(g[3], e[3], 5, &greedy);
    auto [og, oe] = RunTwin(p, step, 16, 2);
    ExpectCloseSamples(og, oe);
  }
  for (const int i : {2, 3}) {  // their tokens are the same on both sides
    SCOPED_TRACE(i);
    ExpectDecodeLogits(p, c, g[i], e[i], rng, kPaddedRelL2);
  }
}

// Eager: two sequences past the largest bucket; and, for a model whose padding tokens cost more
// (AllRowsConfig: 2 layers at Llama-3-8B's width, ~0.5 us a padding token past 128 against 12
// us saved), a step padded from 129 to 256 tokens, one sequence or two, while 240 tokens replay.
TEST(MixedGraphTest, StepsPastTheBucketsOrTheRuleRunEagerly) {
  {
    const ModelConfig c = SmolLm2Config();
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    Pair p = MakePair(c, seed, {16, 64});
    ASSERT_TRUE(p.graph && p.eager);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    std::vector<TestSeq> g, e;
    NewSeqs(c, rng, {50, 30}, &g, &e);
    TwinStep step(p);
    step.Add(g[0], e[0], 50, &greedy);
    step.Add(g[1], e[1], 30, &greedy);
    auto [og, oe] = RunTwin(p, step, 0, 2);
    ExpectSameSamples(og, oe);  // the same eager launches
  }
  const ModelConfig c = AllRowsConfig();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 256});
  ASSERT_TRUE(p.graph && p.eager);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<TestSeq> g, e;
  NewSeqs(c, rng, {129, 100, 29, 240, 120, 120}, &g, &e);
  for (const std::vector<int>& seqs : std::vector<std::vector<int>>{{0}, {1, 2}}) {
    TwinStep step(p);
    for (const int i : seqs) step.Add(g[i], e[i], static_cast<int>(g[i].tokens.size()), &greedy);
    auto [og, oe] = RunTwin(p, step, 0, seqs.size());
    ExpectSameSamples(og, oe);
  }
  SamplingParams top5 = greedy;  // ExpectCloseSamples compares the top five
  top5.logprobs = 5;
  for (const std::vector<int>& seqs : std::vector<std::vector<int>>{{3}, {4, 5}}) {
    TwinStep step(p);
    for (const int i : seqs) step.Add(g[i], e[i], static_cast<int>(g[i].tokens.size()), &top5);
    auto [og, oe] = RunTwin(p, step, 256, seqs.size());
    ExpectCloseSamples(og, oe);  // padded 240 -> 256 tokens: close, not bitwise
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
