// Full-model logits of CudaBackend vs CpuBackend (bf16 weights on both, so the difference is the
// GPU's bf16 activations) on random tiny and SmolLM2-shaped weights, over chunked prefill,
// mixed and decode steps.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {
namespace {

// Full-model tolerance: bf16 activations rounded ~7 times per layer; fp32 residual stream.
constexpr double kLogitsTol = 2e-2;
// One logits row's: the worst row of a step measured 0.0172 (pooled 0.015) on an H100 over these
// tests (session 60); a head zeroed in one layer of one row reads 0.048-0.073 (a review's float64
// model of the SmolLM2 shape).
constexpr double kRowLogitsTol = 2.5e-2;

std::unique_ptr<CudaBackend> MakeCuda(const ModelConfig& c, uint64_t seed, int32_t num_blocks) {
  return MakeCudaBackend(c, seed, {.num_blocks = num_blocks});
}

// The step's logits rows (one per sample) within kLogitsTol of the CPU's over all rows, and each
// row within kRowLogitsTol: pooled over 16 rows, one row's error is diluted about four times (a
// head zeroed in one layer of one row read ~0.06 alone, ~0.015 pooled).
void ExpectSameLogits(Backend& cpu, Backend& gpu, const StepInput& in, const std::string& what) {
  auto want = cpu.ComputeLogits(in);
  auto got = gpu.ComputeLogits(in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  const double err = RelL2(*got, *want);
  const size_t rows = in.samples.size(), vocab = rows > 0 ? got->size() / rows : 0;
  double worst = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    worst = std::max(worst, RelL2(std::span<const float>(got->data() + r * vocab, vocab),
                                  std::span<const float>(want->data() + r * vocab, vocab)));
  }
  // Measured errors, for the log.
  std::printf("  %s: logits rel L2 %.3g, worst of %zu rows %.3g\n", what.c_str(), err, rows,
              worst);
  EXPECT_LE(err, kLogitsTol) << what;
  EXPECT_LE(worst, kRowLogitsTol) << what << ": the worst row";
}

// Greedy sampling (temperature 0) for the sequences' rows.
SamplingParams Greedy() {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  return greedy;
}

void RunScenario(const ModelConfig& c) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int num_blocks = 64;
  auto cpu = MakeCpuBackend(c, seed, num_blocks);
  auto gpu = MakeCuda(c, seed, num_blocks);
  ASSERT_TRUE(cpu && gpu);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<TestSeq> seqs(3);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = RandomTokens(c, i == 0 ? 70 : 25 + 10 * static_cast<int>(i), rng);
  }
  const SamplingParams greedy = Greedy();
  int32_t next_block = 0;
  StepBuilder b(16, &next_block);
  // Step 1: first chunk of seq 0 (40 tokens) + all of seq 1.
  b.Add(seqs[0], 40, nullptr);
  b.Add(seqs[1], static_cast<int32_t>(seqs[1].tokens.size()), &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "prefill chunk 1");
  // Step 2 (mixed): rest of seq 0 (reads chunk 1 from the cache) + all of seq 2.
  b.Add(seqs[0], 30, &greedy);
  b.Add(seqs[2], static_cast<int32_t>(seqs[2].tokens.size()), &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "prefill chunk 2");
  // Decode steps: append a random token to each sequence.
  for (int step = 0; step < 4; ++step) {
    for (TestSeq& s : seqs) {
      s.tokens.push_back(tok(rng));
      b.Add(s, 1, &greedy);
    }
    ExpectSameLogits(*cpu, *gpu, b.Build(true), "decode " + std::to_string(step));
  }
}

// One sequence: a prefill of `prompt` tokens and a chunk of one more, then decode steps of one
// token (which link their
// norms through the GEMVs, kernels/model_forward.h, where the shapes allow); then steps that do
// not link them, then one-token steps again. expect_path asserts that the backend takes the path
// the test means to cover. Its one-row decodes read contexts prompt + 2 ... prompt + 6, + 8 and
// + 9 (prompt + 7 is the decode of two); num_blocks must be at least ceil((prompt + 9) / 16) + 2.
void RunOneSequence(const ModelConfig& c, int32_t prompt,
                    const std::function<void(const CudaBackend&)>& expect_path,
                    int32_t num_blocks = 16) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto cpu = MakeCpuBackend(c, seed, num_blocks);
  auto gpu = MakeCuda(c, seed, num_blocks);
  ASSERT_TRUE(cpu && gpu);
  expect_path(*gpu);
  if (::testing::Test::HasFatalFailure()) return;
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  TestSeq seq;
  seq.tokens = RandomTokens(c, prompt, rng);
  const SamplingParams greedy = Greedy();
  int32_t next_block = 0;
  StepBuilder b(16, &next_block);
  b.Add(seq, static_cast<int32_t>(seq.tokens.size()), &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "prefill");
  // A one-token chunk that is not decode-only (a prompt's last token alone): it links its norms
  // as a one-token decode step does, with prefill attention's kernel.
  seq.tokens.push_back(tok(rng));
  b.Add(seq, 1, &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "one-token prefill chunk");
  const auto decode_alone = [&](const std::string& what) {
    seq.tokens.push_back(tok(rng));
    b.Add(seq, 1, &greedy);
    ExpectSameLogits(*cpu, *gpu, b.Build(true), what);
  };
  for (int step = 0; step < 5; ++step) decode_alone("decode " + std::to_string(step));
  // Other steps in between (a prefill, which does not link its norms, and a decode of two
  // sequences, linked over two rows where the shapes allow), then one-token steps again: the
  // linked norms' sums must still start from zero.
  TestSeq other;
  other.tokens = RandomTokens(c, 20, rng);
  b.Add(other, static_cast<int32_t>(other.tokens.size()), &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "second prefill");
  for (TestSeq* s : {&seq, &other}) {
    s->tokens.push_back(tok(rng));
    b.Add(*s, 1, &greedy);
  }
  ExpectSameLogits(*cpu, *gpu, b.Build(true), "decode of two");
  for (int step = 0; step < 2; ++step) decode_alone("decode alone again " + std::to_string(step));
}

// Sixteen sequences at Llama-3-8B's hidden size: decode steps of 16 rows fold the norms into the
// weights (kernels/model_forward.h FoldsNorms: qkv on cuBLASLt, a bf16 residual stream); steps of
// fewer rows (the GEMV) and prefills run the same folded weights with norms of ones.
TEST(CudaBackendTest, FoldedNormsLogitsMatchCpu) {
  const ModelConfig c = AllRowsConfig();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int num_blocks = 64, rows = 16;
  // Norm weights far from one (0.2-3), so a weight applied twice or not at all shows.
  ModelWeights weights = RandomWeights(c, seed);
  for (LayerWeights& l : weights.layers) {
    l.attn_norm = RandomUniform(l.attn_norm.size(), 0.2f, 3.0f, rng);
    l.ffn_norm = RandomUniform(l.ffn_norm.size(), 0.2f, 3.0f, rng);
  }
  auto cpu = MakeCpuBackend(c, weights, num_blocks);
  auto gpu = MakeCudaBackend(c, std::move(weights), {.num_blocks = num_blocks});
  ASSERT_TRUE(cpu && gpu);
  ASSERT_TRUE(gpu->folds_norms_at(rows)) << "the path this test means to cover";
  ASSERT_FALSE(gpu->folds_norms_at(2)) << "two rows run on the GEMV";
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<TestSeq> seqs(rows);
  for (TestSeq& s : seqs) s.tokens = RandomTokens(c, 9, rng);
  const SamplingParams greedy = Greedy();
  int32_t next_block = 0;
  StepBuilder b(16, &next_block);
  for (int half = 0; half < 2; ++half) {
    for (int i = 0; i < rows / 2; ++i) {
      TestSeq& s = seqs[half * rows / 2 + i];
      b.Add(s, static_cast<int32_t>(s.tokens.size()), &greedy);
    }
    ExpectSameLogits(*cpu, *gpu, b.Build(false), "prefill " + std::to_string(half));
  }
  for (int step = 0; step < 3; ++step) {
    for (TestSeq& s : seqs) {
      s.tokens.push_back(tok(rng));
      b.Add(s, 1, &greedy);
    }
    ExpectSameLogits(*cpu, *gpu, b.Build(true), "folded decode " + std::to_string(step));
  }
  for (int i = 0; i < 2; ++i) {  // two rows: the GEMV with the folded weights
    seqs[i].tokens.push_back(tok(rng));
    b.Add(seqs[i], 1, &greedy);
  }
  ExpectSameLogits(*cpu, *gpu, b.Build(true), "decode of two");
}

TEST(CudaBackendTest, TinyModelLogitsMatchCpu) { RunScenario(TinyConfig()); }

// An odd vocabulary (a Hugging Face directory's rows trimmed to its tokenizer's ids, 32001 or
// 151665 in real files): the LM head leaves its even-width paths, the logits rows their 16-byte
// alignment, the sampler its vector loads; prefill and decode logits still match the CPU's.
TEST(CudaBackendTest, AnOddVocabularyLogitsMatchCpu) {
  ModelConfig c = TinyConfig();
  c.vocab_size = 1001;
  RunScenario(c);
}

// Norms linked through the row-streaming GEMV (every projection streams by rows).
TEST(CudaBackendTest, LinkedNormsOneSequenceLogitsMatchCpu) {
  RunOneSequence(AllRowsConfig(), 37, [](const CudaBackend& gpu) {
    ASSERT_TRUE(gpu.links_norms_at(1)) << "the path this test means to cover";
  });
}

// Norms linked through the tensor-core GEMV (all but the LM head run on it).
TEST(CudaBackendTest, SmolLm2ShapedOneSequenceLogitsMatchCpu) {
  RunOneSequence(SmolLm2Config(), 37, [](const CudaBackend& gpu) {
    ASSERT_TRUE(gpu.links_norms_at(1)) << "the path this test means to cover";
  });
}

// Decode attention released early by the qkv GEMV, its older keys copied before its PDL wait in
// 16-warp blocks (Llama-3.2-1B's width: the default path of its one-row steps).
TEST(CudaBackendTest, EarlyReleasedAttentionOneSequenceLogitsMatchCpu) {
  RunOneSequence(Llama1BLayersConfig(), 37, [](const CudaBackend& gpu) {
    ASSERT_TRUE(gpu.prefetches_kv_at(1)) << "the path this test means to cover";
  });
}

TEST(CudaBackendTest, SmolLm2ShapedLogitsMatchCpu) { RunScenario(SmolLm2Config()); }

// Steps of `num_seqs` sequences with random prompts (sequence i: first_len + len_step * i
// tokens) on a CPU and a CUDA backend (`options`) over the same random weights (seed()), greedy,
// logits compared at each step.
class StepsAgainstCpu {
 public:
  StepsAgainstCpu(const ModelConfig& c, const CudaTestOptions& options, size_t num_seqs,
                  int first_len, int len_step)
      : c_(c),
        seed_(FreshSeed()),
        rng_(seed_),
        cpu_(MakeCpuBackend(c, seed_, options.num_blocks)),
        gpu_(MakeCudaBackend(c, seed_, options)),
        tok_(0, c.vocab_size - 1),
        seqs_(num_seqs) {
    for (size_t i = 0; i < seqs_.size(); ++i) {
      seqs_[i].tokens = RandomTokens(c, first_len + len_step * static_cast<int>(i), rng_);
    }
  }
  uint64_t seed() const { return seed_; }
  bool ok() const { return cpu_ && gpu_; }  // both backends were made
  const CudaBackend& gpu() const { return *gpu_; }
  // Sequences [first, first + count) prefilled in one step.
  void Prefill(size_t first, size_t count, const std::string& what) {
    for (size_t i = first; i < first + count; ++i) {
      b_.Add(seqs_[i], static_cast<int32_t>(seqs_[i].tokens.size()), &greedy_);
    }
    ExpectSameLogits(*cpu_, *gpu_, b_.Build(false), what);
  }
  // Every sequence prefilled, `group` a step (at most max_num_tokens tokens, 512 by default).
  void PrefillAll(size_t group) {
    for (size_t first = 0; first < seqs_.size(); first += group) {
      const size_t count = std::min(group, seqs_.size() - first);
      Prefill(first, count, "prefill of " + std::to_string(count) + " from " +
                                std::to_string(first));
    }
  }
  // One random token for each of sequences [0, count), decoded in one step.
  void Decode(size_t count, const std::string& what) {
    for (size_t i = 0; i < count; ++i) {
      seqs_[i].tokens.push_back(tok_(rng_));
      b_.Add(seqs_[i], 1, &greedy_);
    }
    ExpectSameLogits(*cpu_, *gpu_, b_.Build(true), what);
  }
  // A mixed step: one random token for each of sequences [0, count), then the first `chunk`
  // tokens of a new prompt, sampled too (a chunk that is the whole prompt).
  void Mixed(size_t count, int32_t chunk, const std::string& what) {
    for (size_t i = 0; i < count; ++i) {
      seqs_[i].tokens.push_back(tok_(rng_));
      b_.Add(seqs_[i], 1, &greedy_);
    }
    TestSeq& fresh = fresh_.emplace_back();
    fresh.tokens = RandomTokens(c_, chunk, rng_);
    b_.Add(fresh, chunk, &greedy_);
    ExpectSameLogits(*cpu_, *gpu_, b_.Build(false), what);
  }

 private:
  ModelConfig c_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::unique_ptr<CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
  std::uniform_int_distribution<int32_t> tok_;
  std::vector<TestSeq> seqs_;
  std::deque<TestSeq> fresh_;  // Mixed's new prompts (a deque: their addresses stay)
  const SamplingParams greedy_ = Greedy();
  int32_t next_block_ = 0;
  StepBuilder b_{16, &next_block_};
};

// Decode steps of several sequences link their norms too (each row its own sums): steps of 3, 1,
// 4 and 2 sequences in turn, with prefills (not linked) in between, then 8, 6 and 4: past 4 rows
// the LM head runs on cuBLASLt, so the final norm is a launch and the last down projection only
// zeroes the last FFN norm's slot. Every slot's sums must start from zero whatever the rows of
// the step before (each consumer zeroes the previous slot's entries of its m rows).
TEST(CudaBackendTest, LinkedNormsSeveralSequencesLogitsMatchCpu) {
  StepsAgainstCpu steps(SmolLm2Config(), {.num_blocks = 64}, 8, 20, 13);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  for (const int32_t rows : {1, 2, 3, 4, 6, 8}) {
    ASSERT_TRUE(steps.gpu().links_norms_at(rows)) << rows << ": the path this test covers";
    ASSERT_EQ(steps.gpu().links_final_norm_at(rows), rows <= 4) << rows;
  }
  steps.Prefill(0, 3, "prefill of three");
  for (int step = 0; step < 3; ++step) steps.Decode(3, "decode of three " + std::to_string(step));
  steps.Decode(1, "decode of one");
  steps.Prefill(3, 1, "prefill of the fourth");
  for (int step = 0; step < 2; ++step) steps.Decode(4, "decode of four " + std::to_string(step));
  steps.Decode(2, "decode of two");
  steps.Decode(4, "decode of four again");
  steps.Prefill(4, 4, "prefill of four more");
  for (int step = 0; step < 2; ++step) steps.Decode(8, "decode of eight " + std::to_string(step));
  steps.Decode(6, "decode of six");
  steps.Decode(4, "decode of four after eight");
  steps.Decode(8, "decode of eight again");
}

// Decode steps of 12, 16 and 9 sequences link the layers' norms through the GEMV's upper-half
// kernels (the final norm a launch: the LM head runs on cuBLASLt), with the qkv projection's RoPE
// fused at those rows, and a step of 4 between them links every norm: logits against the CPU
// backend at each step.
TEST(CudaBackendTest, LinkedNormsPastEightRowsLogitsMatchCpu) {
  StepsAgainstCpu steps(SmolLm2Config(), {.num_blocks = 128, .max_norm_link_rows = 16}, 16, 8, 3);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  for (const int32_t rows : {9, 12, 16}) {
    ASSERT_TRUE(steps.gpu().links_norms_at(rows)) << rows << ": the path this test covers";
    ASSERT_FALSE(steps.gpu().links_final_norm_at(rows)) << rows;
  }
  ASSERT_TRUE(steps.gpu().links_final_norm_at(4));
  steps.PrefillAll(8);
  for (const size_t count : {12, 16, 9, 4, 16}) {
    steps.Decode(count, "decode of " + std::to_string(count));
  }
}

// Decode steps of 17-48 sequences: SmolLM2-135M's layer projections run on the GEMV in slices
// of 16 rows (gemv.h kGemvMaxRows, up to matmul.cc's kGemvSlicedRows; every slice reads the
// weight again), past the rows that link norms, with the qkv projection's RoPE fused. Logits
// against the CPU backend at steps of 17, 48, 24, 33 and 48 rows (a slice of one row, whole
// slices, and partial ones).
TEST(CudaBackendTest, SlicedGemvDecodeLogitsMatchCpu) {
  const ModelConfig c = SmolLm2Config();
  auto ctx = kernels::MatmulContext::Create(/*use_gemv=*/true);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  const int32_t h = c.hidden_size, inter = c.intermediate_size;
  const int32_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  for (const int32_t rows : {17, 24, 33, 48}) {
    for (const auto& [n, k] : {std::pair{qkv, h}, {h, h}, {2 * inter, h}, {h, inter}}) {
      kernels::MatmulParams p;
      p.m = rows;
      p.n = n;
      p.k = k;
      ASSERT_FALSE(kernels::MatmulRunsOnCublas(**ctx, p))
          << rows << " rows, n " << n << ", k " << k << ": the path this test covers";
      if (n == qkv) {
        ASSERT_TRUE(kernels::MatmulFusesRope(**ctx, p)) << rows << " rows: RoPE fused";
      }
    }
  }
  StepsAgainstCpu steps(c, {.num_blocks = 256, .max_num_seqs = 48}, 48, 3, 1);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  for (const int32_t rows : {17, 48}) {
    ASSERT_FALSE(steps.gpu().links_norms_at(rows)) << rows << ": past the linked rows";
  }
  steps.PrefillAll(8);
  for (const size_t count : {17, 48, 24, 33, 48}) {
    steps.Decode(count, "decode of " + std::to_string(count));
  }
}

// A backend of 64 sequences (the engine's default max_num_seqs) folds SmolLM2-135M's norms into
// its weights at creation (model_forward_folded.cc: its qkv projection at 64 rows runs on
// cuBLASLt), as the server runs the real file: decode steps of 49-64 rows run the folded layers
// (a bf16 residual stream), and steps of 1-48 rows the linked and sliced GEMVs over the folded
// weights with norms of ones. Logits against the CPU backend's unfolded model (norm weights
// 0.8-1.2) at steps of 1, 4, 12, 40, 56 and 64 rows; then mixed steps, the usual step under load
// (40 and 63 decode rows beside a new prompt: decode attention for those rows, prefill attention
// for the prompt's), and a decode of all 64 that reads what they stored.
TEST(CudaBackendTest, FoldedSmolLm2WeightsLogitsMatchCpu) {
  StepsAgainstCpu steps(SmolLm2Config(), {.num_blocks = 512, .max_num_seqs = 64}, 64, 2, 1);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  for (const int32_t rows : {49, 56, 64}) {
    ASSERT_TRUE(steps.gpu().folds_norms_at(rows)) << rows << ": the path this test covers";
  }
  for (const int32_t rows : {1, 4, 12}) {
    ASSERT_TRUE(steps.gpu().links_norms_at(rows)) << rows << ": the path this test covers";
  }
  ASSERT_FALSE(steps.gpu().folds_norms_at(40));
  steps.PrefillAll(8);
  for (const size_t count : {1, 4, 12, 40, 56, 64}) {
    steps.Decode(count, "decode of " + std::to_string(count));
  }
  steps.Mixed(40, 60, "40 decode rows and a 60-token prompt");
  steps.Mixed(63, 30, "63 decode rows and a 30-token prompt");
  steps.Decode(64, "decode of 64 after the mixed steps");
}

// Llama-3-8B's width (AllRowsConfig) at the batch sizes between one row and the fold: 3, 5 and 8
// rows on the tensor-core GEMV with the norms as launches (several rows of weights this large
// link none), 12 and 15 on cuBLASLt with folded norms; logits against the CPU at every step.
TEST(CudaBackendTest, LlamaWidthMiddleBatchesLogitsMatchCpu) {
  StepsAgainstCpu steps(AllRowsConfig(), {.num_blocks = 64}, 16, 9, 1);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  for (const int32_t rows : {3, 5, 8}) {
    ASSERT_FALSE(steps.gpu().links_norms_at(rows)) << rows << ": the path this test covers";
    ASSERT_FALSE(steps.gpu().folds_norms_at(rows)) << rows << ": the path this test covers";
  }
  for (const int32_t rows : {12, 15}) {
    ASSERT_TRUE(steps.gpu().folds_norms_at(rows)) << rows << ": the path this test covers";
  }
  steps.PrefillAll(8);
  for (const size_t count : {3, 5, 8, 12, 15, 8}) {
    steps.Decode(count, "decode of " + std::to_string(count));
  }
}

// Decode steps of `counts` rows, each replaying the graph of `bucket` (the backend's one) over the
// folded norms, padded where the rows are fewer: the GEMMs multiply the bucket's rows on
// cuBLASLt, not the step's, and the padding rows must leave the real rows' logits alone.
void ExpectPaddedFoldedSteps(StepsAgainstCpu& steps, int32_t bucket,
                             const std::vector<int32_t>& counts) {
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps.gpu().graph_buckets(), std::vector<int32_t>{bucket});
  for (const int32_t rows : counts) {
    ASSERT_TRUE(steps.gpu().folds_norms_at(rows)) << rows << ": the path this test covers";
  }
  steps.PrefillAll(8);
  for (const int32_t rows : counts) {
    const int64_t replays = steps.gpu().decode_graph_replays();
    steps.Decode(rows, "decode of " + std::to_string(rows) + " in bucket " +
                           std::to_string(bucket) + "'s graph");
    EXPECT_EQ(steps.gpu().decode_graph_replays(), replays + 1) << rows << " rows";
  }
}

// Padded decode buckets on cuBLASLt with folded norms, as a server runs them with graphs on:
// SmolLM2-135M's 60 and 57 rows in bucket 64's graph, Llama-3-8B's width's 12 and 9 in bucket
// 16's; then the exact bucket. Logits against the CPU backend at every step.
TEST(CudaBackendTest, PaddedFoldedBucketsLogitsMatchCpu) {
  {
    StepsAgainstCpu steps(SmolLm2Config(),
                          {.graphs = true,
                           .num_blocks = 512,
                           .max_num_seqs = 64,
                           .graph_batch_sizes = {64}},
                          64, 2, 1);
    ExpectPaddedFoldedSteps(steps, 64, {60, 57, 64});
  }
  {
    StepsAgainstCpu steps(AllRowsConfig(),
                          {.graphs = true, .num_blocks = 64, .graph_batch_sizes = {16}}, 16, 9,
                          1);
    ExpectPaddedFoldedSteps(steps, 16, {12, 9, 16});
  }
}

// An odd vocabulary at SmolLM2-135M's width (32001: a Hugging Face directory's rows trimmed to
// its tokenizer's ids): past 4 rows the LM head leaves the GEMV (matmul.cc GemvShape: n > 16384
// at 5-8 rows, n * k > 4 Mi at 9-16) for cuBLASLt with an odd fp32 output width (rows of 128,004
// bytes: three in four off their 16-byte alignment). Logits against the CPU backend at a prefill
// of 12 sampled rows and decode steps of 5, 8 and 12 rows.
TEST(CudaBackendTest, AnOddVocabularyOnCublasLogitsMatchCpu) {
  ModelConfig c = SmolLm2Config();
  c.num_layers = 2;
  c.vocab_size = 32001;
  auto ctx = kernels::MatmulContext::Create(/*use_gemv=*/true);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  for (const int32_t rows : {5, 8, 12}) {
    kernels::MatmulParams lm_head;
    lm_head.y_f32 = true;
    lm_head.m = rows;
    lm_head.n = c.vocab_size;
    lm_head.k = c.hidden_size;
    ASSERT_TRUE(kernels::MatmulRunsOnCublas(**ctx, lm_head)) << rows << ": the path covered";
  }
  StepsAgainstCpu steps(c, {.num_blocks = 64}, 12, 5, 3);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  steps.PrefillAll(12);
  for (const size_t count : {5, 8, 12}) {
    steps.Decode(count, "decode of " + std::to_string(count));
  }
}

// Steps of more than the default 512 tokens (a server run with --max_num_batched_tokens 2048):
// a prefill of two prompts in one step of 1,900 tokens (prefill attention over 1,200 query rows
// of one sequence, the projections on cuBLASLt at m = 1,900), one of 1,700, decode steps that
// read every key, and a mixed step of three decode rows beside a 1,000-token prompt. Four layers
// at SmolLM2-135M's shape keep the CPU reference short.
TEST(CudaBackendTest, StepsPastFiveHundredTwelveTokensLogitsMatchCpu) {
  ModelConfig c = SmolLm2Config();
  c.num_layers = 4;
  StepsAgainstCpu steps(
      c, {.num_blocks = 320, .max_model_len = 2048, .max_num_tokens = 2048}, 3, 700, 500);
  SCOPED_TRACE(steps.seed());
  ASSERT_TRUE(steps.ok());
  steps.Prefill(0, 2, "prefill of 700 + 1200 tokens");
  steps.Prefill(2, 1, "prefill of 1700 tokens");
  steps.Decode(3, "decode of 3");
  steps.Mixed(3, 1000, "3 decode rows and a 1000-token prompt");
  steps.Decode(3, "decode of 3 after the mixed step");
}

// Mixed steps: decode rows (one-token sequences at rows 0, 1, ...) beside prompt chunks go to
// decode attention, the other rows to prefill attention (ModelForward::SplitsDecodeRows): beside
// one chunk (prefill attention's tensor-core kernel), beside three short ones in the same 64 rows
// (its CUDA-core kernel for blocks of many sequences); a decode row after a prompt's rows stays
// with prefill attention; a step of one-token sequences that is not decode-only leaves prefill
// attention no row. Contexts past one 256-key partition, so decode attention splits its keys.
// Logits against the CPU backend at every step, then decode steps that read every key the mixed
// steps stored.
void RunMixed(const ModelConfig& c) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int num_blocks = 128;
  auto cpu = MakeCpuBackend(c, seed, num_blocks);
  auto gpu = MakeCuda(c, seed, num_blocks);
  ASSERT_TRUE(cpu && gpu);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<TestSeq> seqs(8);
  const int lengths[] = {300, 40, 100, 50, 20, 5, 6, 7};
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = RandomTokens(c, lengths[i], rng);
  }
  const SamplingParams greedy = Greedy();
  int32_t next_block = 0;
  StepBuilder b(16, &next_block);
  const auto decode_row = [&](int i) {
    seqs[i].tokens.push_back(tok(rng));
    b.Add(seqs[i], 1, &greedy);
  };
  for (int i = 0; i < 3; ++i) {
    b.Add(seqs[i], lengths[i], &greedy);
  }
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "prefill of three");
  for (int i = 0; i < 3; ++i) decode_row(i);
  b.Add(seqs[3], 30, nullptr);  // a first chunk: no logits
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "three decode rows and a chunk");
  b.Add(seqs[3], 20, &greedy);
  decode_row(0);  // at row 20: prefill attention's
  b.Add(seqs[4], 20, &greedy);
  decode_row(1);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "decode rows among chunks");
  for (int i = 0; i < 3; ++i) decode_row(i);
  for (int i = 5; i < 8; ++i) b.Add(seqs[i], lengths[i], &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "three decode rows and three short prompts");
  for (int i = 0; i < 8; ++i) decode_row(i);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "one-token sequences, not decode-only");
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < 8; ++i) decode_row(i);
    ExpectSameLogits(*cpu, *gpu, b.Build(true), "decode " + std::to_string(step));
  }
}

TEST(CudaBackendTest, MixedStepsLogitsMatchCpu) {
  RunMixed(SmolLm2Config());
  ModelConfig c = TinyConfig();  // heads of 128: decode attention's other tensor-core kernel
  c.hidden_size = 256;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 128;
  RunMixed(c);
  RunMixed(TinyConfig());  // heads of 32: decode attention on CUDA cores
}

// One sequence at contexts of 152-159 keys, on models whose o projection input is at most 1024
// elements (kernels/decode_plan.h's rule): decode attention leaves four partitions of 64 keys
// and the o projection's GEMV merges them as it reads its input. Logits against the CPU backend
// at TinyConfig's heads (attention on CUDA cores) and SmolLM2-135M's (9 heads of 64 over 3 kv
// heads: tensor cores, four layers). RTGEN_DECODE_MERGE_IN_O=0 turns the rule off (then the
// path assertion fails, by design: it says the test did not cover what it means to).
TEST(CudaBackendTest, PartitionsMergedByOProjectionLogitsMatchCpu) {
  ModelConfig smol = SmolLm2Config();
  smol.num_layers = 4;
  for (const ModelConfig& c : {TinyConfig(), smol}) {
    SCOPED_TRACE(c.name);
    RunOneSequence(c, 150, [](const CudaBackend& gpu) {
      for (int32_t context = 152; context <= 159; ++context) {  // RunOneSequence's decodes
        ASSERT_TRUE(gpu.merges_in_o_at(1, context)) << "the path this test means to cover";
        ASSERT_FALSE(gpu.merges_in_o_at(2, context)) << "one sequence only";
      }
      ASSERT_FALSE(gpu.merges_in_o_at(1, 64)) << "one partition: nothing to merge";
    });
  }
}

// One SmolLM2-135M sequence (four layers) decoding across 256 and across 512 keys, as a
// single-user chat does past its first 256 and 512 tokens: the o projection merges two to eight
// partitions of 64 keys up to 512 keys, and attention merges its own partitions past them
// (decode_plan.h kMaxSplitsMergedInO). Logits against the CPU backend at every step.
TEST(CudaBackendTest, OneSequenceAcrossContextClassesLogitsMatchCpu) {
  ModelConfig smol = SmolLm2Config();
  smol.num_layers = 4;
  for (const int32_t prompt : {250, 506}) {  // one-row decodes: 252-256, 258-259; 508-512, 514-515
    SCOPED_TRACE(prompt);
    RunOneSequence(
        smol, prompt,
        [](const CudaBackend& gpu) {
          for (const int32_t context : {252, 256, 258, 259, 508, 512}) {
            ASSERT_TRUE(gpu.merges_in_o_at(1, context)) << context << ": the path covered";
          }
          for (const int32_t context : {514, 515}) {
            ASSERT_FALSE(gpu.merges_in_o_at(1, context)) << context << ": attention merges";
          }
        },
        /*num_blocks=*/40);
  }
}

// One SmolLM2-135M sequence (four layers) on a backend of max_model_len 2048, the server's
// default: a 2040-token prompt prefilled in chunks of 512 tokens, then decoded a token a step up
// to a context of exactly 2048, the last context class (partitions that attention merges) with
// every column of the block table used. Logits against the CPU backend at every sampled step.
TEST(CudaBackendTest, OneSequenceUpToMaxModelLenLogitsMatchCpu) {
  ModelConfig smol = SmolLm2Config();
  smol.num_layers = 4;
  constexpr int32_t kMaxModelLen = 2048, kPrompt = 2040, kChunk = 512;
  const int32_t num_blocks = kMaxModelLen / kTestBlockSize;
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto cpu = MakeCpuBackend(smol, seed, num_blocks);
  auto gpu = MakeCudaBackend(smol, seed, {.num_blocks = num_blocks, .max_model_len = kMaxModelLen});
  ASSERT_TRUE(cpu && gpu);
  ASSERT_EQ(gpu->max_model_len(), kMaxModelLen);
  for (const int32_t context : {2041, 2048}) {
    ASSERT_FALSE(gpu->merges_in_o_at(1, context)) << context << ": attention merges";
  }
  std::uniform_int_distribution<int32_t> tok(0, smol.vocab_size - 1);
  TestSeq seq;
  seq.tokens = RandomTokens(smol, kPrompt, rng);
  const SamplingParams greedy = Greedy();
  int32_t next_block = 0;
  StepBuilder b(kTestBlockSize, &next_block);
  for (int32_t done = 0; done + kChunk < kPrompt; done += kChunk) {  // chunks that sample nothing
    b.Add(seq, kChunk, nullptr);
    const StepInput in = b.Build(false);
    for (Backend* backend : {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(gpu.get())}) {
      auto logits = backend->ComputeLogits(in);
      ASSERT_TRUE(logits.ok()) << logits.status();
    }
  }
  b.Add(seq, kPrompt - seq.computed, &greedy);
  ExpectSameLogits(*cpu, *gpu, b.Build(false), "the prompt's last chunk");
  while (static_cast<int32_t>(seq.tokens.size()) < kMaxModelLen) {
    seq.tokens.push_back(tok(rng));
    b.Add(seq, 1, &greedy);
    ExpectSameLogits(*cpu, *gpu, b.Build(true),
                     "decode at context " + std::to_string(seq.tokens.size()));
  }
}

TEST(CudaBackendTest, Llama3RopeScalingLogitsMatchCpu) {
  ModelConfig c = TinyConfig();
  c.rope_theta = 500000.0f;
  c.rope_scaling = Llama3RopeScaling{};
  c.head_dim = 64;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  RunScenario(c);
}

// A step of one new sequence's 3-token prompt, nothing sampled, its block from b's counter.
StepInput ThreeTokenPrompt(StepBuilder& b) {
  TestSeq s;
  s.tokens = {1, 2, 3};
  b.Add(s, 3, nullptr);
  return b.Build(false);
}

TEST(CudaBackendTest, RejectsBadSteps) {
  auto gpu = MakeCuda(TinyConfig(), 1, 8);
  ASSERT_TRUE(gpu);
  int32_t next = 0;
  StepBuilder b(16, &next);
  StepInput in = ThreeTokenPrompt(b);
  in.slot_mapping[1] = 8 * 16;  // past the pool
  EXPECT_FALSE(gpu->ComputeLogits(in).ok());
  // A sample for a sequence with no tokens in the step (its logits row would be -1).
  SamplingParams greedy;
  in = StepInput();
  in.token_ids = {5};  // one token, owned by sequence 1; sequence 0 has none this step
  in.positions = {0};
  in.slot_mapping = {16};
  in.query_start = {0, 0, 1};
  in.context_lens = {1, 1};
  in.max_blocks_per_seq = 1;
  in.block_tables = {0, 1};
  SampleRequest r;
  r.seq_index = 1;
  r.params = &greedy;
  in.samples = {r};
  EXPECT_TRUE(gpu->ComputeLogits(in).ok());  // the same step sampling sequence 1 is fine
  in.samples[0].seq_index = 0;
  EXPECT_FALSE(gpu->ComputeLogits(in).ok());
  in = StepInput();
  EXPECT_FALSE(gpu->ComputeLogits(in).ok());
  // A decode-only step writes its sequences' newest keys only (decode attention reads the older
  // ones early): a token at another position, or stored to another slot, is refused by name.
  TestSeq d;
  d.tokens = {1, 2, 3, 4};
  b.Add(d, 3, nullptr);
  ASSERT_TRUE(gpu->ComputeLogits(b.Build(false)).ok());
  b.Add(d, 1, &greedy);
  const StepInput decode = b.Build(true);
  ASSERT_TRUE(gpu->ComputeLogits(decode).ok());
  in = decode;
  in.positions[0] -= 1;
  absl::Status st = gpu->ComputeLogits(in).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("positions[0]"), std::string::npos) << st;
  in = decode;
  in.slot_mapping[0] -= 1;
  st = gpu->ComputeLogits(in).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("slot_mapping[0]"), std::string::npos) << st;
  in = decode;
  in.slot_mapping[0] = -1;  // padding: nothing written
  EXPECT_TRUE(gpu->ComputeLogits(in).ok());
}

// A reallocation that fails (a pool past any GPU's memory) leaves no cache: steps are refused
// as before the first allocation, not run over the old step buffers and an empty pool; a good
// reallocation brings the backend back.
TEST(CudaBackendTest, FailedKvReallocationRefusesSteps) {
  auto gpu = MakeCuda(TinyConfig(), 1, 8);
  ASSERT_TRUE(gpu);
  int32_t next = 0;
  StepBuilder b(16, &next);
  const StepInput in = ThreeTokenPrompt(b);
  ASSERT_TRUE(gpu->ComputeLogits(in).ok());
  const absl::Status huge = gpu->AllocateKvCache({1 << 30, 1 << 10});
  EXPECT_FALSE(huge.ok());
  const absl::Status refused = gpu->ComputeLogits(in).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  ASSERT_TRUE(gpu->AllocateKvCache({8, kTestBlockSize}).ok());
  EXPECT_TRUE(gpu->ComputeLogits(in).ok());
}

// A step that fails partway through queuing (injected after 7 of SmolLM2's 30 layers, as a
// launch or cuBLASLt error there would) leaves no state behind: run again, it gives the logits of
// a twin backend that never failed, bit for bit, and so do the steps after it. One sequence links
// its norms, so the failed step's layer 6 added its sum for layer 7's norm, which no consumer of
// that step zeroed (before, the next step added to it: its logits differed).
TEST(CudaBackendTest, StepFailingPartwayLeavesNoState) {
  const ModelConfig c = SmolLm2Config();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto failing = MakeCuda(c, seed, 16);
  auto twin = MakeCuda(c, seed, 16);
  ASSERT_TRUE(failing && twin);
  ASSERT_TRUE(failing->links_norms_at(1)) << "the path this test means to cover";
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  TestSeq f;  // the failing backend's sequence; t the twin's
  f.tokens = RandomTokens(c, 20, rng);
  TestSeq t = f;
  int32_t next_f = 0, next_t = 0;
  const SamplingParams greedy = Greedy();
  const auto step = [&](CudaBackend& gpu, TestSeq& s, int32_t* next, int32_t count) {
    StepBuilder b(kTestBlockSize, next);
    b.Add(s, count, &greedy);
    return gpu.ComputeLogits(b.Build(/*decode_only=*/count == 1));
  };
  const auto expect_equal = [&](int32_t count, const std::string& what) {
    auto lf = step(*failing, f, &next_f, count);
    auto lt = step(*twin, t, &next_t, count);
    ASSERT_TRUE(lf.ok()) << lf.status();
    ASSERT_TRUE(lt.ok()) << lt.status();
    ASSERT_EQ(f.blocks, t.blocks);
    ASSERT_EQ(lf->size(), lt->size());
    EXPECT_EQ(std::memcmp(lf->data(), lt->data(), lf->size() * sizeof(float)), 0) << what;
  };
  ASSERT_NO_FATAL_FAILURE(expect_equal(20, "prefill"));
  for (int i = 0; i < 4; ++i) {  // positions 20-23: in the second block, no block allocated
    const int32_t id = tok(rng);
    f.tokens.push_back(id);
    t.tokens.push_back(id);
    if (i == 1) {
      const TestSeq before = f;
      failing->FailNextEagerStepAfterLayersForTesting(7);
      const absl::Status failed = step(*failing, f, &next_f, 1).status();
      EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
      EXPECT_NE(failed.message().find("injected failure after 7 layers"), std::string::npos)
          << failed;
      f = before;  // the engine fails such a step's sequences; here the step runs again
    }
    ASSERT_NO_FATAL_FAILURE(expect_equal(1, "decode " + std::to_string(i)));
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
