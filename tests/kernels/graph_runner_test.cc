// Decode CUDA graphs: replay is bitwise equal to eager execution of the same batch, a padded
// bucket yields the same greedy tokens as the exact batch, every bucket replays without
// allocating, a batch past the largest bucket runs eagerly, padded buckets sample with per-row
// parameters as eager does, and seeded sampling reproduces.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/graph_runner.h"
#include "tests/kernels/graph_pair.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {
namespace {

// A backend of up to `max_num_seqs` sequences, with KV blocks for them (at least 128): Prefill's
// sequence i has 10 + 7 i tokens, ~i / 2 + 1 blocks of 16, and a few decode steps more.
std::unique_ptr<CudaBackend> Make(const ModelConfig& c, uint64_t seed, bool graphs,
                                  std::vector<int32_t> buckets = {1, 2, 4, 8},
                                  int32_t max_num_seqs = 16) {
  return MakeCudaBackend(c, seed,
                         {.graphs = graphs,
                          .num_blocks = std::max(128, max_num_seqs * (max_num_seqs / 4 + 8)),
                          .max_num_seqs = max_num_seqs,
                          .graph_batch_sizes = std::move(buckets)});
}

// Prefills `n` sequences on every backend (identically; steps of at most kStepTokens tokens),
// then returns them.
std::vector<TestSeq> Prefill(std::vector<Backend*> backends, const ModelConfig& c, int n,
                             std::mt19937_64& rng, std::vector<int32_t>* next_blocks) {
  std::vector<TestSeq> seqs(n);
  for (int i = 0; i < n; ++i) {
    seqs[i].tokens = RandomTokens(c, 10 + 7 * i, rng);
    seqs[i].seed = 1000 + i;
  }
  constexpr int kStepTokens = 512;  // the test backends' max_num_tokens
  for (size_t k = 0; k < backends.size(); ++k) {
    std::vector<TestSeq> copy = seqs;
    StepBuilder b(16, &(*next_blocks)[k]);
    int tokens = 0;  // in the step being built
    for (TestSeq& s : copy) {
      const int len = static_cast<int>(s.tokens.size());
      if (tokens > 0 && tokens + len > kStepTokens) {
        EXPECT_TRUE(backends[k]->ComputeLogits(b.Build(false)).ok());
        tokens = 0;
      }
      b.Add(s, len, nullptr);
      tokens += len;
    }
    EXPECT_TRUE(backends[k]->ComputeLogits(b.Build(false)).ok());
    if (k + 1 == backends.size()) seqs = copy;
  }
  return seqs;
}

// `steps` greedy decode steps of `seqs` (already in both backends' caches, at the same blocks:
// next[0] == next[1]) on a graph-replaying and an eager backend, each sequence fed the step's
// random token plus its index (modulo the vocabulary): the graph backend replays a graph at every
// step and the eager one none, and the logits are bitwise equal at every step.
void ExpectDecodeStepsEqual(CudaBackend* graph, CudaBackend* eager, const ModelConfig& c,
                            int steps, std::mt19937_64& rng, std::vector<TestSeq>* seqs,
                            std::vector<int32_t>* next) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  for (int step = 0; step < steps; ++step) {
    std::vector<TestSeq> g = *seqs, e = *seqs;
    StepBuilder bg(16, &(*next)[0]), be(16, &(*next)[1]);
    const int32_t t = tok(rng);
    for (size_t i = 0; i < seqs->size(); ++i) {
      const int32_t id = (t + static_cast<int32_t>(i)) % c.vocab_size;
      g[i].tokens.push_back(id);
      e[i].tokens.push_back(id);
      bg.Add(g[i], 1, &greedy);
      be.Add(e[i], 1, &greedy);
    }
    const int64_t graph_replays = graph->decode_graph_replays();
    auto lg = graph->ComputeLogits(bg.Build(true));
    auto le = eager->ComputeLogits(be.Build(true));
    ASSERT_TRUE(lg.ok()) << lg.status();
    ASSERT_TRUE(le.ok()) << le.status();
    ASSERT_EQ(graph->decode_graph_replays(), graph_replays + 1) << "step " << step;
    ASSERT_EQ(eager->decode_graph_replays(), 0) << "step " << step;
    ASSERT_EQ(lg->size(), le->size());
    EXPECT_EQ(std::memcmp(lg->data(), le->data(), lg->size() * sizeof(float)), 0)
        << c.name << " step " << step;
    for (float v : *lg) ASSERT_TRUE(std::isfinite(v));
    *seqs = g;
  }
}

// `steps` decode steps of `num_seqs` sequences on a graph-replaying and an eager backend: the
// logits are bitwise equal at every step. `linked`: whether these steps link their norms through
// the GEMVs (checked, so the test covers the path it means to; a padded bucket's graph links
// when its rows do), `final_linked` whether the final norm too (the LM head on the GEMV);
// `folded`: whether they fold their norms (model_forward.h FoldsNorms). `padded_bucket`: the
// graph's one bucket, past num_seqs (0: buckets 1, 2, 4, 8, or num_seqs itself past 8).
// `prefetches_kv`, where given: whether decode attention copies its older keys before its wait
// (released early by the qkv GEMV: CudaBackend::prefetches_kv_at).
void ExpectReplayEqualsEager(const ModelConfig& c, int num_seqs, int steps, bool linked,
                             bool final_linked, bool folded = false, int32_t padded_bucket = 0,
                             std::optional<bool> prefetches_kv = std::nullopt) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<int32_t> buckets =
      padded_bucket > 0 ? std::vector<int32_t>{padded_bucket}
      : num_seqs > 8    ? std::vector<int32_t>{num_seqs}
                        : std::vector<int32_t>{1, 2, 4, 8};
  const int32_t max_num_seqs = std::max({16, num_seqs, padded_bucket});
  auto graph = Make(c, seed, true, buckets, max_num_seqs);
  auto eager = Make(c, seed, false, {1, 2, 4, 8}, max_num_seqs);
  ASSERT_TRUE(graph && eager);
  ASSERT_EQ(graph->graph_buckets(), buckets);
  ASSERT_EQ(graph->links_norms_at(num_seqs), linked);
  ASSERT_EQ(graph->links_final_norm_at(num_seqs), final_linked);
  if (num_seqs <= buckets.back()) {  // the bucket whose graph replays these steps
    const int32_t bucket = *std::lower_bound(buckets.begin(), buckets.end(), num_seqs);
    ASSERT_EQ(graph->links_norms_at(bucket), linked);
    ASSERT_EQ(graph->links_final_norm_at(bucket), final_linked);
  }
  ASSERT_EQ(graph->folds_norms_at(num_seqs), folded);
  if (prefetches_kv) {
    ASSERT_EQ(graph->prefetches_kv_at(num_seqs), *prefetches_kv);
  }
  std::vector<int32_t> next = {0, 0};
  std::vector<TestSeq> seqs = Prefill({graph.get(), eager.get()}, c, num_seqs, rng, &next);
  ExpectDecodeStepsEqual(graph.get(), eager.get(), c, steps, rng, &seqs, &next);
}

// Several sequences: linked norms where every layer projection takes the link at that many rows
// (the tiny model at 4; SmolLM2-135M at 3, replayed in bucket 4's graph, at 7 in bucket 8's and
// at 12 through the GEMV's upper-half kernels, its final norm a launch at 7 and 12: the LM head
// runs on cuBLASLt); past the 16 rows a step links no norms: SmolLM2-135M at 20 runs its layers
// on the GEMV in slices of 16 rows (up to matmul.cc's kGemvSlicedRows, 48), and past them every
// projection on cuBLASLt with folded norms (a backend of 72 sequences folds its decode steps').
TEST(GraphRunnerTest, ReplayIsBitwiseEqualToEager) {
  ExpectReplayEqualsEager(TinyConfig(), 4, 3, true, true);
  ExpectReplayEqualsEager(SmolLm2Config(), 3, 3, true, true);
  ExpectReplayEqualsEager(SmolLm2Config(), 7, 3, true, false);
  ExpectReplayEqualsEager(SmolLm2Config(), 12, 3, true, false);
  ExpectReplayEqualsEager(SmolLm2Config(), 20, 3, false, false, false);
  ExpectReplayEqualsEager(SmolLm2Config(), 72, 3, false, false, true);
  // Rows padded into buckets past 8 (the production buckets 16 and 24): 12 real rows in bucket
  // 16's graph, through the upper-half linked kernels; 20 in bucket 24's, whose second slice of
  // 16 rows holds 4 real ones.
  ExpectReplayEqualsEager(SmolLm2Config(), 12, 3, true, false, false, 16);
  ExpectReplayEqualsEager(SmolLm2Config(), 20, 3, false, false, false, 24);
}

// One sequence where the step links its norms through the GEMVs (norm sums in fixed point,
// integer atomics; each step also zeroes the sums for the next): through the row-streaming
// kernel, and through the tensor-core one.
TEST(GraphRunnerTest, LinkedNormsReplayIsBitwiseEqualToEager) {
  ExpectReplayEqualsEager(AllRowsConfig(), 1, 4, true, true);
  ExpectReplayEqualsEager(SmolLm2Config(), 1, 4, true, true);
}

// Sixteen sequences at Llama-3-8B's hidden size fold their norms: tuned cuBLASLt algorithms
// adding to the bf16 residual in place, replayed.
TEST(GraphRunnerTest, FoldedNormsReplayIsBitwiseEqualToEager) {
  ExpectReplayEqualsEager(AllRowsConfig(), 16, 3, false, false, true);
}

// Decode attention released early by the qkv GEMV and copying its older keys before its wait
// (Llama-3.2-1B's width, gpu_test_util.h Llama1BLayersConfig): steps of one and four rows
// replayed, bitwise equal to eager. Its 64 MiB gate/up weight takes the norm link at one row
// only (ModelForward::LinksNorms), and the 16 MiB LM head on the GEMV takes the final one there.
TEST(GraphRunnerTest, EarlyReleasedAttentionReplayIsBitwiseEqualToEager) {
  ExpectReplayEqualsEager(Llama1BLayersConfig(), 1, 4, true, true, false, 0, true);
  ExpectReplayEqualsEager(Llama1BLayersConfig(), 4, 4, false, false, false, 0, true);
}

// Decode graphs per context class (graph_runner.h): the test backends take contexts up to 1024,
// so the two-sequence bucket gets classes 256, 512 and 1024 (1, 2 and 4 key partitions), the
// one-sequence bucket 64, 128, 256 and 512 (1, 2, 4 and 8 partitions of 64 keys, merged by the o
// projection: kernels/decode_plan.h) and 1024 (4 of 256); buckets past four sequences one class
// (model_forward.cc kContextClassRows). Steps whose longest
// context falls in each class replay that class's graph, bitwise equal to the eager step planned
// for the same class, and report that class. (With the plan's A/B switches set, the classes
// differ: then only the bitwise checks run.)
TEST(GraphRunnerTest, ContextClassesReplayBitwiseEqualToEager) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const std::vector<int32_t> buckets = {1, 2, 8};
  auto graph = MakeCudaBackend(c, seed, {.graphs = true, .num_blocks = 256,
                                         .graph_batch_sizes = buckets});
  auto eager = MakeCudaBackend(c, seed, {.graphs = false, .num_blocks = 256});
  ASSERT_TRUE(graph && eager);
  ASSERT_EQ(graph->graph_buckets(), buckets);
  bool default_plans = true;
  for (const char* name : {"RTGEN_DECODE_CONTEXT_CLASSES", "RTGEN_DECODE_SPLITS",
                           "RTGEN_DECODE_MIN_PARTITION", "RTGEN_DECODE_MERGE_IN_O",
                           "RTGEN_PERSISTENT_DECODE"}) {
    default_plans = default_plans && std::getenv(name) == nullptr;
  }
  if (default_plans) {
    EXPECT_EQ(graph->graph_count(), 9u)
        << "five context classes for bucket 1, three for bucket 2, one for 8";
  }
  std::vector<int32_t> next = {0, 0};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  // Batches by their sequences' prompt lengths, the longest setting the class: every class of
  // bucket 1, then of bucket 2.
  for (const std::vector<int>& prompts : std::vector<std::vector<int>>{
           {20}, {100}, {200}, {300}, {700}, {30, 200}, {100, 400}, {40, 600}}) {
    SCOPED_TRACE(::testing::Message() << "prompts " << prompts.front() << ".." << prompts.back());
    std::vector<TestSeq> seqs(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      seqs[i].tokens = RandomTokens(c, prompts[i], rng);
    }
    for (size_t i = 0; i < seqs.size(); ++i) {  // prefill in steps of at most 512 tokens
      for (int done = 0; done < prompts[i];) {
        const int count = std::min(512, prompts[i] - done);
        TestSeq copy = seqs[i];
        StepBuilder bg(16, &next[0]), be(16, &next[1]);
        bg.Add(seqs[i], count, nullptr);
        be.Add(copy, count, nullptr);
        ASSERT_TRUE(graph->ComputeLogits(bg.Build(false)).ok());
        ASSERT_TRUE(eager->ComputeLogits(be.Build(false)).ok());
        done += count;
      }
    }
    ASSERT_NO_FATAL_FAILURE(ExpectDecodeStepsEqual(graph.get(), eager.get(), c, 2, rng, &seqs,
                                                   &next));
    // One more step on both: the same greedy tokens, and the class of its longest context
    // (the prompt, the two steps above and this one's token).
    const int longest = *std::max_element(prompts.begin(), prompts.end()) + 3;
    int32_t want = prompts.size() == 1 ? 64 : 256;  // the first class, then doubling to 1024
    while (want < longest && want < 1024) want *= 2;
    std::vector<TestSeq> e = seqs;
    StepBuilder bg(16, &next[0]), be(16, &next[1]);
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].tokens.push_back(7);
      e[i].tokens.push_back(7);
      bg.Add(seqs[i], 1, &greedy);
      be.Add(e[i], 1, &greedy);
    }
    auto og = graph->Execute(bg.Build(true));
    auto oe = eager->Execute(be.Build(true));
    ASSERT_TRUE(og.ok() && oe.ok());
    EXPECT_TRUE(og->graph_replayed);
    EXPECT_EQ(og->graph_bucket, static_cast<int32_t>(seqs.size()));
    ASSERT_EQ(og->sampled.size(), oe->sampled.size());
    for (size_t i = 0; i < og->sampled.size(); ++i) {
      EXPECT_EQ(og->sampled[i].token_id, oe->sampled[i].token_id) << "seq " << i;
    }
    EXPECT_EQ(og->context_bound, oe->context_bound);
    if (default_plans) {
      EXPECT_EQ(og->context_bound, want) << "longest context " << longest;
    }
  }
}

// A sampled row's logprob and top-n list are the same on the graph and the eager backend (a
// replay's logits are the eager step's, bit for bit: ExpectDecodeStepsEqual); a greedy row's
// within kGreedyLogprobTolerance: its log-sum-exp is summed in as many pieces as the step's row
// count gives it (sampling.cu PlanSampleSplits), and a padded bucket has more rows
// (sampling_test.cc).
constexpr float kGreedyLogprobTolerance = 1e-3f;

// Decoding of the same sequences on two backends of SmolLM2-135M's shape, random weights from
// one seed: one replaying graphs (buckets 1, 2, 4, 8), one eager, `n` sequences prefilled in both
// at the same blocks (sequence i seeded 1000 + i). Each sequence decodes from token i + 1, then
// from its sampled tokens.
class DecodePair {
 public:
  DecodePair(uint64_t seed, int n)
      : rng_(seed), graph_(Make(c_, seed, true)), eager_(Make(c_, seed, false)) {
    if (!ready()) return;
    g_ = Prefill({graph_.get(), eager_.get()}, c_, n, rng_, &next_);
    e_ = g_;
    for (size_t i = 0; i < g_.size(); ++i) {
      g_[i].tokens.push_back(static_cast<int32_t>(i) + 1);
      e_[i].tokens.push_back(static_cast<int32_t>(i) + 1);
    }
  }

  bool ready() const { return graph_ && eager_; }
  const CudaBackend& graph() const { return *graph_; }

  // One step of sequences [0, rows) on both backends, greedy or row i with (*params)[i]: the
  // eager backend never replays, the two sample the same tokens, logprobs and top-n lists
  // (ExpectSameSample), and each token is fed back. *out: the graph backend's output.
  void Step(size_t rows, StepOutput* out, const std::vector<SamplingParams>* params = nullptr) {
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    StepBuilder bg(16, &next_[0]), be(16, &next_[1]);
    for (size_t i = 0; i < rows; ++i) {
      const SamplingParams* p = params ? &params->at(i) : &greedy;
      bg.Add(g_[i], 1, p);
      be.Add(e_[i], 1, p);
    }
    auto og = graph_->Execute(bg.Build(true));
    auto oe = eager_->Execute(be.Build(true));
    ASSERT_TRUE(og.ok()) << og.status();
    ASSERT_TRUE(oe.ok()) << oe.status();
    EXPECT_FALSE(oe->graph_replayed);
    ASSERT_EQ(og->sampled.size(), rows);
    ASSERT_EQ(oe->sampled.size(), rows);
    for (size_t i = 0; i < rows; ++i) {
      SCOPED_TRACE(::testing::Message() << "seq " << i);
      const bool greedy = !params || params->at(i).greedy();
      ExpectSameSample(og->sampled[i], oe->sampled[i], greedy ? kGreedyLogprobTolerance : 0.0f);
      g_[i].tokens.push_back(og->sampled[i].token_id);
      g_[i].output.push_back(og->sampled[i].token_id);
      e_[i].tokens.push_back(oe->sampled[i].token_id);
      e_[i].output.push_back(oe->sampled[i].token_id);
    }
    *out = std::move(*og);
  }

 private:
  const ModelConfig c_ = SmolLm2Config();
  std::mt19937_64 rng_;
  std::unique_ptr<CudaBackend> graph_, eager_;
  std::vector<int32_t> next_ = {0, 0};
  std::vector<TestSeq> g_, e_;  // the sequences as each backend has them
};

// One DecodePair step of `rows` sequences (greedy, or sampled with `params`) whose graph backend
// replays `bucket`'s graph (0: none, the step runs eagerly).
void ExpectStepReplays(DecodePair& pair, size_t rows, int32_t bucket,
                       const std::vector<SamplingParams>* params = nullptr) {
  SCOPED_TRACE(::testing::Message() << rows << " rows");
  StepOutput out;
  ASSERT_NO_FATAL_FAILURE(pair.Step(rows, &out, params));
  EXPECT_EQ(out.graph_replayed, bucket > 0);
  if (bucket > 0) {
    EXPECT_EQ(out.graph_bucket, bucket);
  }
}

TEST(GraphRunnerTest, PaddedBucketGivesSameTokensAsExactBatch) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  DecodePair pair(seed, 3);
  ASSERT_TRUE(pair.ready());
  for (int step = 0; step < 8; ++step) {
    SCOPED_TRACE(step);
    ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, 3, 4));
  }
}

// Sampling with every per-row feature, each row's parameters its own (temperatures 0.5-2, top-k,
// top-p, min-p, the three penalties over the row's own prompt and output, 1-7 logprobs, one row
// greedy), at padded buckets (3 rows in bucket 4's graph, 7 in bucket 8's: their logits are the
// eager step's, bit for bit, ReplayIsBitwiseEqualToEager) and exact ones: the graph backend
// samples what the eager one does, tokens, logprobs and top-n lists (ExpectSameSample). A row
// reading another's parameters, penalty tokens or RNG stream from the graph's fixed buffers, or
// a padding row's, changes its distribution or its draw.
TEST(GraphRunnerTest, PaddedBucketsSampleAsEagerWithPerRowParams) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  DecodePair pair(seed, 7);
  ASSERT_TRUE(pair.ready());
  std::vector<SamplingParams> params(7);
  for (int i = 0; i < 7; ++i) {
    SamplingParams& p = params[i];
    p.temperature = 0.5f + 0.25f * static_cast<float>(i);
    p.top_k = i % 2 == 0 ? 10 + 5 * i : 0;
    p.logprobs = i + 1;
  }
  params[2].temperature = 0.0f;  // greedy, with logprobs
  params[3].top_p = 0.8f;
  params[4].min_p = 0.05f;
  params[1].repetition_penalty = 1.3f;
  params[5].presence_penalty = 0.5f;
  params[6].frequency_penalty = 0.7f;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    for (const auto& [rows, bucket] : std::vector<std::pair<size_t, int32_t>>{
             {3, 4}, {7, 8}, {4, 4}, {2, 2}, {7, 8}}) {
      ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, rows, bucket, &params));
    }
  }
}

// A decode batch past the largest bucket (10 rows over buckets 1, 2, 4, 8) runs eagerly on the
// graph backend: graph_replayed is false (the server counts such a step as
// rtgen_eager_steps_total{reason="decode"}) and its tokens are the eager backend's; the next step,
// of 8 of those sequences, replays bucket 8's graph again.
TEST(GraphRunnerTest, DecodePastTheLargestBucketRunsEagerly) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  DecodePair pair(seed, 10);
  ASSERT_TRUE(pair.ready());
  ASSERT_EQ(pair.graph().graph_buckets(), (std::vector<int32_t>{1, 2, 4, 8}));
  ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, 10, 0));
  ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, 10, 0));
  ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, 8, 8));
}

// Start-up captures every bucket (its cost reported), and a decode step of any size up to the
// largest bucket replays the smallest bucket that holds it without allocating device memory: a
// second pass over the sizes, after one that warms both backends, leaves the device's free memory
// as it was.
TEST(GraphRunnerTest, EveryBucketReplaysAndReplaysAllocateNothing) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  DecodePair pair(seed, 8);
  ASSERT_TRUE(pair.ready());
  const CudaBackend& graph = pair.graph();
  ASSERT_EQ(graph.graph_buckets(), (std::vector<int32_t>{1, 2, 4, 8}));
  EXPECT_GE(graph.graph_count(), 4u);
  EXPECT_GT(graph.graph_capture_seconds(), 0.0);
  EXPECT_GE(graph.graph_capture_bytes(), 0);
  const std::vector<std::pair<size_t, int32_t>> sizes = {{1, 1}, {2, 2}, {3, 4}, {4, 4},
                                                         {5, 8}, {7, 8}, {8, 8}};
  size_t free_after_warm_up = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      size_t total = 0;
      ASSERT_EQ(cudaMemGetInfo(&free_after_warm_up, &total), cudaSuccess);
    }
    SCOPED_TRACE(::testing::Message() << "pass " << pass);
    for (const auto& [rows, bucket] : sizes) {
      ASSERT_NO_FATAL_FAILURE(ExpectStepReplays(pair, rows, bucket));
    }
  }
  size_t free_now = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_now, &total), cudaSuccess);
  EXPECT_EQ(free_now, free_after_warm_up);
}

// Seeded sampling: two runs of the same requests give the same streams, graph or eager; a
// different seed changes the stream.
std::vector<int32_t> SampleStream(const ModelConfig& c, uint64_t weights_seed, bool graphs,
                                  uint64_t request_seed) {
  auto backend = Make(c, weights_seed, graphs);
  if (!backend) return {};
  std::mt19937_64 rng(weights_seed);
  std::vector<int32_t> next = {0};
  std::vector<TestSeq> seqs = Prefill({backend.get()}, c, 2, rng, &next);
  SamplingParams p;
  p.temperature = 3.0f;  // flat enough that another seed changes the stream
  p.top_p = 0.95f;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].seed = request_seed + i;
    seqs[i].tokens.push_back(1);
  }
  std::vector<int32_t> stream;
  for (int step = 0; step < 12; ++step) {
    StepBuilder b(16, &next[0]);
    for (TestSeq& s : seqs) b.Add(s, 1, &p);
    auto out = backend->Execute(b.Build(true));
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return stream;
    for (size_t i = 0; i < seqs.size(); ++i) {
      stream.push_back(out->sampled[i].token_id);
      seqs[i].tokens.push_back(out->sampled[i].token_id);
      seqs[i].output.push_back(out->sampled[i].token_id);
    }
  }
  return stream;
}

TEST(GraphRunnerTest, SeededSamplingReproduces) {
  ModelConfig c = TinyConfig();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  const std::vector<int32_t> a = SampleStream(c, seed, true, 42);
  EXPECT_EQ(a, SampleStream(c, seed, true, 42));
  EXPECT_EQ(a, SampleStream(c, seed, false, 42));  // bucket 2 = exact batch: bitwise equal path
  EXPECT_NE(a, SampleStream(c, seed, true, 4242));
}

}  // namespace
}  // namespace rtgen::testing_gpu
