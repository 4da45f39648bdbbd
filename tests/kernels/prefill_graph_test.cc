// Prefill CUDA graphs (cuda_backend.h max_prefill_graph_tokens): a step prefilling one
// sequence's chunk replays the graph of the smallest token bucket that holds it. At a bucket's
// exact size the replay is bitwise equal to the eager step (sampled token, logprob, top-n, and
// the keys it stored, seen through the next decode steps' logits); a chunk padded to its bucket
// computes what the eager step does within bf16 tolerance (padding rows attend to nothing and
// store nothing); chunks past the largest bucket run eagerly, as do steps of several sequences
// where the multi-sequence graphs are off (mixed_graph_test.cc covers them on).

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/graph_runner.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/graph_pair.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {
namespace {

// Bad options are refused by name: a negative token limit at creation, a token bucket past
// max_num_tokens when the graphs are captured.
TEST(PrefillGraphTest, BadOptionsAreRefusedByName) {
  const ModelConfig c = TinyConfig();
  CudaBackendOptions o;
  o.max_num_tokens = 64;
  o.max_num_seqs = 4;
  o.max_prefill_graph_tokens = -1;
  auto bad = CudaBackend::Create(c, RandomWeights(c, 1), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("max_prefill_graph_tokens"), std::string::npos)
      << bad.status();
  o.max_prefill_graph_tokens = 512;  // capped at max_num_tokens: 16, 32, 48, 64
  o.prefill_graph_tokens = {16, 65};
  auto b = CudaBackend::Create(c, RandomWeights(c, 1), o);
  ASSERT_TRUE(b.ok()) << b.status();
  const absl::Status st = (*b)->AllocateKvCache({32, kTestBlockSize});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("prefill graph token count 65"), std::string::npos) << st;
  o.prefill_graph_tokens.clear();
  auto capped = CudaBackend::Create(c, RandomWeights(c, 1), o);
  ASSERT_TRUE(capped.ok()) << capped.status();
  ASSERT_TRUE((*capped)->AllocateKvCache({32, kTestBlockSize}).ok());
  EXPECT_EQ((*capped)->prefill_graph_tokens(), (std::vector<int32_t>{16, 32, 48, 64}));
}

// Runs `count` more prompt tokens of g on the graph backend and of e on the eager one, sampling
// the last with `params` when it is not null; expects the graph step to replay `bucket` (0:
// eager). Returns both outputs.
std::pair<StepOutput, StepOutput> Chunk(Pair& p, TestSeq& g, TestSeq& e, int count,
                                        const SamplingParams* params, int32_t bucket) {
  StepBuilder bg(kTestBlockSize, &p.next[0]), be(kTestBlockSize, &p.next[1]);
  bg.Add(g, count, params);
  be.Add(e, count, params);
  absl::StatusOr<StepOutput> og = p.graph->Execute(bg.Build(false));
  absl::StatusOr<StepOutput> oe = p.eager->Execute(be.Build(false));
  EXPECT_TRUE(og.ok()) << og.status();
  EXPECT_TRUE(oe.ok()) << oe.status();
  if (!og.ok() || !oe.ok()) return {};
  EXPECT_EQ(og->graph_replayed, bucket > 0);
  EXPECT_EQ(og->graph_bucket, bucket);
  EXPECT_FALSE(oe->graph_replayed);
  return {*std::move(og), *std::move(oe)};
}

// A chunk of exactly a bucket's size: the same launches as the eager step, replayed. Sampling
// with every device feature the graph's sampler reads from the step's buffers (temperature,
// top-k/p, a repetition penalty over the prompt, seeded RNG, top-5 logprobs).
TEST(PrefillGraphTest, ExactBucketIsBitwiseEqualToEager) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 48, 64, 256, 512});
  ASSERT_TRUE(p.graph && p.eager);
  ASSERT_EQ(p.graph->prefill_graph_tokens(), (std::vector<int32_t>{16, 48, 64, 256, 512}));
  const SamplingParams params = RichParams();
  // 48: SmolLM2's layers on the sliced GEMV; 256 and 512: on cuBLASLt, prefill attention's
  // tensor-core kernel over several blocks of query rows.
  for (const int n : {16, 48, 64, 256, 512}) {
    SCOPED_TRACE(n);
    TestSeq g;
    g.tokens = RandomTokens(c, n, rng);
    g.seed = 77 + n;
    TestSeq e = g;
    auto [og, oe] = Chunk(p, g, e, n, &params, n);
    ASSERT_EQ(og.sampled.size(), 1u);
    ASSERT_EQ(og.sampled[0].top.size(), 5u);
    ExpectSameSamples(og, oe);
    ExpectDecodeLogits(p, c, g, e, rng, 0.0);
  }
}

// Chunks padded to their bucket (1 -> 16, 50 -> 64, 200 -> 256), and a prompt in two chunks
// (250 without a sample -> 256, the graph that computes no logits; then 50 sampled -> 64): the
// sampled logprob and the next steps' logits agree with the eager steps within bf16 tolerance
// (the matmuls at the padded row count may sum in another order). A padding row that stored a
// key, attended, or was sampled in place of the last real row would miss by far more.
TEST(PrefillGraphTest, PaddedChunksMatchEager) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 64, 256});
  ASSERT_TRUE(p.graph && p.eager);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = 5;
  for (const std::vector<int>& chunks :
       std::vector<std::vector<int>>{{1}, {50}, {200}, {250, 50}}) {
    SCOPED_TRACE(::testing::Message() << "chunks " << chunks.front() << ".." << chunks.back());
    int total = 0;
    for (int n : chunks) total += n;
    TestSeq g;
    g.tokens = RandomTokens(c, total, rng);
    TestSeq e = g;
    for (size_t k = 0; k < chunks.size(); ++k) {
      const bool last = k + 1 == chunks.size();
      const int32_t bucket = chunks[k] <= 16 ? 16 : chunks[k] <= 64 ? 64 : 256;
      auto [og, oe] = Chunk(p, g, e, chunks[k], last ? &greedy : nullptr, bucket);
      if (!last) {
        EXPECT_TRUE(og.sampled.empty());
        continue;
      }
      ASSERT_EQ(og.sampled.size(), 1u);
      ExpectCloseSamples(og, oe);  // the sampled row's distribution
    }
    ExpectDecodeLogits(p, c, g, e, rng, kPaddedRelL2);
  }
}

// Steps the graphs do not take run eagerly: a chunk past the largest bucket; two sequences'
// chunks in one step where the multi-sequence graphs are off (mixed_graph_test.cc: on).
TEST(PrefillGraphTest, OtherPrefillStepsRunEagerly) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  Pair p = MakePair(c, seed, {16, 64}, /*mixed=*/false);
  ASSERT_TRUE(p.graph && p.eager);
  EXPECT_EQ(p.graph->mixed_graph_count(), 0u);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  TestSeq g;
  g.tokens = RandomTokens(c, 100, rng);
  TestSeq e = g;
  auto [og, oe] = Chunk(p, g, e, 100, &greedy, 0);
  ASSERT_EQ(og.sampled.size(), 1u);
  EXPECT_EQ(og.sampled[0].token_id, oe.sampled[0].token_id);  // the same eager launches
  TestSeq a, b;
  a.tokens = RandomTokens(c, 10, rng);
  b.tokens = RandomTokens(c, 12, rng);
  StepBuilder two(kTestBlockSize, &p.next[0]);
  two.Add(a, 10, &greedy);
  two.Add(b, 12, &greedy);
  absl::StatusOr<StepOutput> out = p.graph->Execute(two.Build(false));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->graph_replayed);
  EXPECT_EQ(out->sampled.size(), 2u);
}

}  // namespace
}  // namespace rtgen::testing_gpu
