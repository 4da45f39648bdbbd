// The steps rtgen-engine-bench builds: a batch's decode and prefill steps (each sequence's own KV
// blocks, positions, samples), mixed steps joined from both, the sampled tokens taken back (and
// refused out of range), and which sampling the label and the host-penalty rule report.

#include "tools/engine_bench_steps.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kVocab = 300;

StepOutput Sampled(const std::vector<int32_t>& tokens) {
  StepOutput out;
  for (int32_t t : tokens) out.sampled.push_back(SampledToken{t, 0.0f, {}});
  return out;
}

TEST(BenchBatchTest, DecodeStepUsesEachSequencesBlocksAndLastToken) {
  BenchBatch batch(3, 2, 5);  // blocks [2s, 2s + 2) of 16 tokens
  ASSERT_TRUE(batch.Take(Sampled({7, 8, 9}), 0, kVocab).ok());
  const StepInput in = batch.Step(1, 2, 20, 1, kVocab);  // sequences 1, 2 at position 20
  EXPECT_TRUE(in.is_decode_only);
  EXPECT_THAT(in.token_ids, ElementsAre(8, 9));
  EXPECT_THAT(in.positions, ElementsAre(20, 20));
  // Position 20 is block 1 of the sequence, offset 4: sequence 1 -> block 3, 2 -> block 5.
  EXPECT_THAT(in.slot_mapping, ElementsAre(3 * 16 + 4, 5 * 16 + 4));
  EXPECT_THAT(in.query_start, ElementsAre(0, 1, 2));
  EXPECT_THAT(in.context_lens, ElementsAre(21, 21));
  EXPECT_EQ(in.max_blocks_per_seq, 2);
  EXPECT_THAT(in.block_tables, ElementsAre(2, 3, 4, 5));
  ASSERT_EQ(in.samples.size(), 2u);
  EXPECT_EQ(in.samples[0].seq_index, 0);
  EXPECT_EQ(in.samples[1].seq_index, 1);
  EXPECT_EQ(in.samples[1].seed, 5u);
  EXPECT_EQ(in.samples[1].params->temperature, 0.0f);
}

TEST(BenchBatchTest, PrefillStepHasSeededPromptsInTheVocab) {
  BenchBatch batch(2, 1, 11), same(2, 1, 11), other(2, 1, 12);
  const StepInput in = batch.Step(0, 2, 0, 5, kVocab);
  EXPECT_FALSE(in.is_decode_only);
  EXPECT_THAT(in.query_start, ElementsAre(0, 5, 10));
  EXPECT_THAT(in.positions, ElementsAre(0, 1, 2, 3, 4, 0, 1, 2, 3, 4));
  EXPECT_THAT(in.slot_mapping, ElementsAre(0, 1, 2, 3, 4, 16, 17, 18, 19, 20));
  EXPECT_THAT(in.context_lens, ElementsAre(5, 5));
  for (int32_t t : in.token_ids) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, kVocab);
  }
  EXPECT_EQ(in.token_ids, same.Step(0, 2, 0, 5, kVocab).token_ids);
  EXPECT_NE(in.token_ids, other.Step(0, 2, 0, 5, kVocab).token_ids);
  EXPECT_NE(std::vector<int32_t>(in.token_ids.begin(), in.token_ids.begin() + 5),
            std::vector<int32_t>(in.token_ids.begin() + 5, in.token_ids.end()));
}

TEST(BenchBatchTest, TakeRefusesTokensOutsideTheVocabAndMissingLogprobs) {
  BenchBatch batch(2, 1, 1);
  absl::Status s = batch.Take(Sampled({3, kVocab}), 0, kVocab);
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside the vocab"));
  BenchBatch with_logprobs(1, 1, 1, BenchSampling(false, 2));
  s = with_logprobs.Take(Sampled({3}), 0, kVocab);
  EXPECT_THAT(std::string(s.message()), HasSubstr("came with 0 top logprobs (asked for 2)"));
  StepOutput led_by_other = Sampled({3});
  led_by_other.sampled[0].top = {{4, -0.1f}, {3, -0.2f}};
  EXPECT_FALSE(with_logprobs.Take(led_by_other, 0, kVocab).ok());
  StepOutput right = Sampled({3});
  right.sampled[0].top = {{3, -0.1f}, {4, -0.2f}};
  EXPECT_TRUE(with_logprobs.Take(right, 0, kVocab).ok());
  EXPECT_THAT(with_logprobs.last(), ElementsAre(3));
}

TEST(BenchStepsTest, JoinedStepKeepsBothSequencesApart) {
  BenchBatch batch(3, 2, 3);
  ASSERT_TRUE(batch.Take(Sampled({10, 11}), 0, kVocab).ok());
  const StepInput mixed =
      JoinSteps(batch.Step(0, 2, 9, 1, kVocab), batch.Step(2, 1, 0, 4, kVocab));
  EXPECT_FALSE(mixed.is_decode_only);
  EXPECT_EQ(mixed.num_seqs(), 3);
  EXPECT_EQ(mixed.num_tokens(), 6);
  EXPECT_THAT(mixed.query_start, ElementsAre(0, 1, 2, 6));
  EXPECT_THAT(mixed.context_lens, ElementsAre(10, 10, 4));
  EXPECT_THAT(mixed.positions, ElementsAre(9, 9, 0, 1, 2, 3));
  EXPECT_THAT(mixed.slot_mapping, ElementsAre(9, 32 + 9, 64, 65, 66, 67));
  EXPECT_THAT(mixed.block_tables, ElementsAre(0, 1, 2, 3, 4, 5));
  ASSERT_EQ(mixed.samples.size(), 3u);
  EXPECT_EQ(mixed.samples[2].seq_index, 2);
  EXPECT_THAT(std::vector<int32_t>(mixed.token_ids.begin(), mixed.token_ids.begin() + 2),
              ElementsAre(10, 11));
}

TEST(BenchStepsTest, SeqTokensNameThePromptAndOutputSoFar) {
  BenchBatch batch(2, 1, 4);
  SeqTokens tokens(batch, 3, 5, kVocab);
  tokens.Restart({20, 21});
  tokens.outputs[1].push_back(22);
  StepInput in = batch.Step(0, 2, 3, 1, kVocab);
  tokens.Name(in);
  EXPECT_THAT(std::vector<int32_t>(in.samples[0].prompt.begin(), in.samples[0].prompt.end()),
              ElementsAre(batch.PromptToken(0, 0, kVocab), batch.PromptToken(0, 1, kVocab),
                          batch.PromptToken(0, 2, kVocab)));
  EXPECT_THAT(std::vector<int32_t>(in.samples[1].output.begin(), in.samples[1].output.end()),
              ElementsAre(21, 22));
}

TEST(BenchStepsTest, MixedStepsOwnBlocksForTheLongerOfPromptAndNewPrompt) {
  EngineBenchOptions o;
  o.prompt = 100;  // a decode row needs 101 tokens: 7 blocks
  EXPECT_EQ(MixedBlocksPerSeq(o), 7);
  o.mixed = {{4, 16}, {2, 300}};  // the 300-token prompt needs 19
  EXPECT_EQ(MixedBlocksPerSeq(o), 19);
}

TEST(BenchStepsTest, KvPoolHoldsTheLargestRun) {
  EngineBenchOptions o;  // 256 sequences of 128 + 128 tokens: 16 blocks each
  EXPECT_EQ(DecodeBlocksPerSeq(o), 16);
  EXPECT_EQ(TtftBlocks(2048), 129);  // 2048 tokens and the sampled one
  EXPECT_EQ(TtftBlocks(2047), 128);
  BenchKvNeeds kv = BenchKv(o);
  EXPECT_EQ(kv.blocks, 256 * 16);
  EXPECT_EQ(kv.max_seqs, 256);
  o.batches = {1, 8};
  o.prompt = 100;
  o.steps = 20;  // 120 tokens: 8 blocks
  EXPECT_EQ(DecodeBlocksPerSeq(o), 8);
  kv = BenchKv(o);
  EXPECT_EQ(kv.blocks, 129);  // the 2048-token TTFT prompt
  EXPECT_EQ(kv.max_seqs, 8);
  o.mixed = {{300, 16}};  // 301 sequences of 101 tokens: 7 blocks each
  kv = BenchKv(o);
  EXPECT_EQ(kv.blocks, 301 * 7);
  EXPECT_EQ(kv.max_seqs, 301);
}

TEST(BenchStepsTest, SamplingLabelSaysWherePenaltiesRun) {
  EngineBenchOptions o;
  EXPECT_EQ(SamplingLabel(o), "greedy");
  o.logprobs = 3;
  EXPECT_EQ(SamplingLabel(o), "greedy, top 3 logprobs per row");
  o.penalties = true;
  EXPECT_FALSE(PenaltiesOnHost(o));
  EXPECT_THAT(SamplingLabel(o), HasSubstr("on the device"));
  o.max_penalty_tokens = 100;  // the 128-token prompt and 128 outputs read more
  EXPECT_TRUE(PenaltiesOnHost(o));
  EXPECT_THAT(SamplingLabel(o), HasSubstr("on the host"));
}

}  // namespace
}  // namespace rtgen::tools
