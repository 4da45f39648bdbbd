#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cpu/tiny_model.h"

namespace rtgen {
namespace {

using testing::MakeStep;
using testing::ReferenceLogits;
using testing::RelativeError;
using testing::SeqChunk;
using testing::TinyConfig;
using testing::TinyWeights;

constexpr int32_t kBlockSize = 4;
constexpr float kF32Tolerance = 1e-4f;  // max |diff| / max(1, max |ref logit|)

std::unique_ptr<CpuBackend> MakeBackend(const ModelConfig& c, ModelWeights w, WeightDtype dtype,
                                        int threads = 2, int32_t num_blocks = 32) {
  auto b = CpuBackend::Create(c, std::move(w), {threads, dtype});
  EXPECT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->AllocateKvCache({num_blocks, kBlockSize}).ok());
  return std::move(*b);
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = (i * 37 + salt * 101 + 5) % 300;
  return p;
}

std::vector<int32_t> Blocks(int first, int count) {
  std::vector<int32_t> b(count);
  std::iota(b.begin(), b.end(), first);
  return b;
}

std::vector<float> Logits(CpuBackend& b, const StepInput& in) {
  auto r = b.ComputeLogits(in);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<float>();
}

TEST(CpuBackendTest, F32PrefillAndDecodeMatchReference) {
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 1);
  auto backend = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<int32_t> tokens = Prompt(11, 0);
  const std::vector<int32_t> blocks = Blocks(0, 5);
  std::vector<float> logits = Logits(*backend, MakeStep({{tokens, 0, blocks}}, kBlockSize, nullptr));
  ASSERT_EQ(logits.size(), size_t(c.vocab_size));
  EXPECT_LE(RelativeError(logits, ReferenceLogits(c, w, tokens)), kF32Tolerance);
  for (int step = 0; step < 4; ++step) {  // decode, crossing a block boundary
    const int32_t next = (step * 53 + 7) % c.vocab_size;
    tokens.push_back(next);
    const int32_t pos = static_cast<int32_t>(tokens.size()) - 1;
    StepInput in = MakeStep({{{next}, pos, blocks}}, kBlockSize, nullptr);
    in.is_decode_only = true;
    logits = Logits(*backend, in);
    EXPECT_LE(RelativeError(logits, ReferenceLogits(c, w, tokens)), kF32Tolerance) << step;
  }
}

TEST(CpuBackendTest, Bf16MatchesReferenceOnRoundedWeights) {
  // bf16 storage is exact for bf16-rounded weights, so the same tight tolerance applies; against
  // the unrounded fp32 reference the error is the rounding's (stated: <= 3e-2 here).
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 2);
  auto backend = MakeBackend(c, w, WeightDtype::kBf16);
  const std::vector<int32_t> tokens = Prompt(9, 1);
  std::vector<float> logits =
      Logits(*backend, MakeStep({{tokens, 0, Blocks(0, 3)}}, kBlockSize, nullptr));
  EXPECT_LE(RelativeError(logits, ReferenceLogits(c, testing::RoundedToBf16(w), tokens)),
            kF32Tolerance);
  const double vs_f32 = RelativeError(logits, ReferenceLogits(c, w, tokens));
  EXPECT_LE(vs_f32, 3e-2);
  EXPECT_GT(vs_f32, 1e-6);  // it really stored bf16
}

TEST(CpuBackendTest, ChunkedPrefillEqualsOneShot) {
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 3);
  const std::vector<int32_t> tokens = Prompt(13, 2);
  const std::vector<int32_t> blocks = Blocks(0, 4);
  auto one = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<float> expected = Logits(*one, MakeStep({{tokens, 0, blocks}}, kBlockSize, nullptr));

  auto chunked = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<float> got;
  for (auto [begin, end] : {std::pair{0, 5}, std::pair{5, 10}, std::pair{10, 13}}) {
    SeqChunk chunk{{tokens.begin() + begin, tokens.begin() + end}, begin, blocks, end == 13};
    got = Logits(*chunked, MakeStep({chunk}, kBlockSize, nullptr));
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(CpuBackendTest, ScatteredBlockTableEqualsContiguous) {
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 4);
  const std::vector<int32_t> tokens = Prompt(14, 3);
  auto a = MakeBackend(c, w, WeightDtype::kF32);
  auto b = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<float> contiguous =
      Logits(*a, MakeStep({{tokens, 0, {0, 1, 2, 3}}}, kBlockSize, nullptr));
  std::vector<float> scattered =
      Logits(*b, MakeStep({{tokens, 0, {27, 3, 19, 8}}}, kBlockSize, nullptr));
  ASSERT_EQ(contiguous.size(), scattered.size());
  for (size_t i = 0; i < contiguous.size(); ++i) EXPECT_EQ(contiguous[i], scattered[i]) << i;
}

TEST(CpuBackendTest, SequencesInOneStepEqualEachAlone) {
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 5);
  const std::vector<int32_t> pa = Prompt(6, 4), pb = Prompt(9, 5);
  auto alone_a = MakeBackend(c, w, WeightDtype::kF32);
  auto alone_b = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<float> la = Logits(*alone_a, MakeStep({{pa, 0, Blocks(0, 2)}}, kBlockSize, nullptr));
  std::vector<float> lb = Logits(*alone_b, MakeStep({{pb, 0, Blocks(0, 3)}}, kBlockSize, nullptr));

  auto both = MakeBackend(c, w, WeightDtype::kF32);
  std::vector<float> l = Logits(
      *both, MakeStep({{pa, 0, Blocks(10, 2)}, {pb, 0, Blocks(20, 3)}}, kBlockSize, nullptr));
  ASSERT_EQ(l.size(), 2u * c.vocab_size);
  for (int i = 0; i < c.vocab_size; ++i) {
    EXPECT_NEAR(l[i], la[i], 1e-5);
    EXPECT_NEAR(l[c.vocab_size + i], lb[i], 1e-5);
  }

  // A mixed step: a decode token for a, a prefill chunk for a new sequence b2.
  const int32_t next = 17;
  std::vector<int32_t> pa2 = pa;
  pa2.push_back(next);
  std::vector<float> mixed = Logits(
      *both, MakeStep({{{next}, 6, Blocks(10, 2)}, {pb, 0, Blocks(0, 3)}}, kBlockSize, nullptr));
  EXPECT_LE(RelativeError({mixed.begin(), mixed.begin() + c.vocab_size},
                          ReferenceLogits(c, w, pa2)),
            kF32Tolerance);
  EXPECT_LE(RelativeError({mixed.begin() + c.vocab_size, mixed.end()}, ReferenceLogits(c, w, pb)),
            kF32Tolerance);
}

TEST(CpuBackendTest, GqaEqualsMhaWithRepeatedKvHeads) {
  const ModelConfig gqa = TinyConfig();  // 4 query heads, 2 kv heads
  const ModelWeights w = TinyWeights(gqa, 6);
  ModelConfig mha = gqa;
  mha.num_kv_heads = gqa.num_heads;
  ModelWeights w_mha = w;
  const int64_t hd = gqa.head_dim, h = gqa.hidden_size;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    for (auto [src, dst] : {std::pair{&w.layers[i].wk, &w_mha.layers[i].wk},
                            std::pair{&w.layers[i].wv, &w_mha.layers[i].wv}}) {
      *dst = Matrix{mha.num_heads * hd, h, {}, {}};
      for (int qh = 0; qh < mha.num_heads; ++qh) {
        const int kvh = qh / (gqa.num_heads / gqa.num_kv_heads);
        dst->data.insert(dst->data.end(), src->data.begin() + kvh * hd * h,
                         src->data.begin() + (kvh + 1) * hd * h);
      }
    }
  }
  const std::vector<int32_t> tokens = Prompt(10, 6);
  auto a = MakeBackend(gqa, w, WeightDtype::kF32);
  auto b = MakeBackend(mha, w_mha, WeightDtype::kF32);
  std::vector<float> la = Logits(*a, MakeStep({{tokens, 0, Blocks(0, 3)}}, kBlockSize, nullptr));
  std::vector<float> lb = Logits(*b, MakeStep({{tokens, 0, Blocks(0, 3)}}, kBlockSize, nullptr));
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5) << i;
}

TEST(CpuBackendTest, UntiedHeadAndThreadCountsAgree) {
  ModelConfig c = TinyConfig();
  c.tie_word_embeddings = false;
  const ModelWeights w = TinyWeights(c, 7);
  const std::vector<int32_t> tokens = Prompt(7, 7);
  const std::vector<double> ref = ReferenceLogits(c, w, tokens);
  for (int threads : {1, 3}) {
    auto b = MakeBackend(c, w, WeightDtype::kF32, threads);
    EXPECT_LE(RelativeError(Logits(*b, MakeStep({{tokens, 0, Blocks(0, 2)}}, kBlockSize, nullptr)),
                            ref),
              kF32Tolerance)
        << threads;
  }
}

TEST(CpuBackendTest, ExecuteSamplesGreedyArgmax) {
  const ModelConfig c = TinyConfig();
  const ModelWeights w = TinyWeights(c, 8);
  auto a = MakeBackend(c, w, WeightDtype::kF32);
  auto b = MakeBackend(c, w, WeightDtype::kF32);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  StepInput in = MakeStep({{Prompt(5, 8), 0, Blocks(0, 2)}, {Prompt(3, 9), 0, Blocks(2, 1)}},
                          kBlockSize, &greedy);
  std::vector<float> logits = Logits(*a, in);
  auto out = b->Execute(in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->sampled.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    auto row = logits.begin() + s * c.vocab_size;
    EXPECT_EQ(out->sampled[s].token_id, std::max_element(row, row + c.vocab_size) - row);
  }
}

TEST(CpuBackendTest, RejectsBadSteps) {
  const ModelConfig c = TinyConfig();
  auto b = MakeBackend(c, TinyWeights(c, 9), WeightDtype::kF32, 2, /*num_blocks=*/4);
  StepInput in = MakeStep({{Prompt(5, 1), 0, {0, 9}}}, kBlockSize, nullptr);
  EXPECT_EQ(b->ComputeLogits(in).status().code(), absl::StatusCode::kInvalidArgument);
  in = MakeStep({{{500}, 0, {0}}}, kBlockSize, nullptr);
  EXPECT_EQ(b->ComputeLogits(in).status().code(), absl::StatusCode::kInvalidArgument);
  // A query_start entry past the token count (sequence 0 would own rows past the step's).
  in = MakeStep({{Prompt(3, 1), 0, {0}}, {Prompt(2, 2), 0, {1}}}, kBlockSize, nullptr);
  ASSERT_TRUE(b->ComputeLogits(in).ok());
  in.query_start[1] = 6;
  const absl::Status past = b->ComputeLogits(in).status();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("query_start[1] = 6"), std::string::npos) << past;
  // A context length whose block count overflows 32 bits: refused, not read past the table.
  in = MakeStep({{{1}, 0, {0}}}, kBlockSize, nullptr);
  ASSERT_TRUE(b->ComputeLogits(in).ok());
  in.context_lens[0] = std::numeric_limits<int32_t>::max();
  in.positions[0] = 3;
  const absl::Status huge = b->ComputeLogits(in).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("needs more blocks than the table has"), std::string::npos)
      << huge;
  auto fresh = CpuBackend::Create(c, TinyWeights(c, 9), {1, WeightDtype::kF32});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->ComputeLogits(MakeStep({{{1}, 0, {0}}}, kBlockSize, nullptr)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ModelWeights bad = TinyWeights(c, 9);
  bad.layers[1].w_up.rows -= 1;
  auto r = CpuBackend::Create(c, std::move(bad), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("layers[1].w_up"), std::string::npos) << r.status();
}

// Attention reads each position through the block table, so a token's K/V must be stored in
// that very slot: a slot past the pool, none (-1) or a slot of another sequence's block is
// refused naming the entry (the last would overwrite the other sequence's cache).
TEST(CpuBackendTest, RejectsSlotsThatAreNotTheirPositionsSlot) {
  const ModelConfig c = TinyConfig();
  auto b = MakeBackend(c, TinyWeights(c, 9), WeightDtype::kF32, 2, /*num_blocks=*/8);
  const StepInput good = MakeStep({{Prompt(5, 1), 0, {0, 1}}}, kBlockSize, nullptr);
  ASSERT_TRUE(b->ComputeLogits(good).ok());
  for (int64_t bad : {int64_t{1000000}, int64_t{-7}, int64_t{-1}, int64_t{7 * kBlockSize}}) {
    StepInput in = good;
    in.slot_mapping[4] = bad;
    const absl::Status s = b->ComputeLogits(in).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("slot_mapping[4] = " + std::to_string(bad) +
                               " is not the slot of position 4 through its block table (4)"),
              std::string::npos)
        << s;
  }
}

// One sample a sequence, as the CUDA backend requires: a second sample of the same sequence
// would be a second token for one position.
TEST(CpuBackendTest, RejectsTwoSamplesOfOneSequence) {
  const ModelConfig c = TinyConfig();
  auto b = MakeBackend(c, TinyWeights(c, 9), WeightDtype::kF32, 2, /*num_blocks=*/8);
  StepInput in = MakeStep({{Prompt(3, 1), 0, {0}}, {Prompt(2, 2), 0, {1}}}, kBlockSize, nullptr);
  ASSERT_TRUE(b->ComputeLogits(in).ok());
  in.samples.push_back(in.samples[0]);
  const absl::Status s = b->ComputeLogits(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("samples[2] names sequence 0, as samples[0] does"),
            std::string::npos)
      << s;
}

// A pool whose size wraps 64 bits is refused, and a refused re-allocation keeps the cache (and
// layout) the backend had: the steps after it are checked against the pool that exists.
TEST(CpuBackendTest, RefusedKvAllocationsLeaveTheCacheAsItWas) {
  const ModelConfig c = TinyConfig();
  auto b = CpuBackend::Create(c, TinyWeights(c, 9), {1, WeightDtype::kF32});
  ASSERT_TRUE(b.ok());
  // 2^30 blocks of 2^29 tokens of one slot stride: 2^59 x stride floats, past 2^64 bytes.
  EXPECT_EQ((*b)->AllocateKvCache({1 << 30, 1 << 29}).code(),
            absl::StatusCode::kResourceExhausted);
  StepInput far = MakeStep({{{1}, 0, {5}}}, kBlockSize, nullptr);
  EXPECT_EQ((*b)->ComputeLogits(far).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*b)->AllocateKvCache({4, kBlockSize}).ok());
  EXPECT_EQ((*b)->AllocateKvCache({1 << 30, 1 << 10}).code(),
            absl::StatusCode::kResourceExhausted);
  const absl::Status s = (*b)->ComputeLogits(far).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("block_tables[0][0] = 5 is outside the pool"), std::string::npos)
      << s;
  EXPECT_TRUE((*b)->ComputeLogits(MakeStep({{{1}, 0, {3}}}, kBlockSize, nullptr)).ok());
}

}  // namespace
}  // namespace rtgen
