// Decode attention's split plan (kernels/decode_plan.h), without a GPU: the partitions a step
// gets, its context classes, and which one-sequence steps have the o projection merge the
// partitions (the merge itself is tested on the GPU: tests/kernels/gemv_merged_input_test.cc).

#include "kernels/decode_plan.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen::kernels {
namespace {

// The context classes of `seqs` sequences over `kv_heads` kv heads on `sms` SMs whose partitions
// attention merges (MergeInO::kNever): the plain split plan's classes.
std::vector<int32_t> PlainContextBounds(int32_t seqs, int32_t kv_heads, int32_t max_context,
                                        int32_t sms) {
  return DecodeStepContextBounds(
      {seqs, kv_heads, /*o_input=*/0, sms, kDefaultMinPartition, MergeInO::kNever}, max_context);
}

// Context classes: one bound per distinct split plan, each planned as PlanDecodeSplits at that
// bound, the last the longest context; a step takes the first bound covering its longest
// context.
TEST(DecodeSplitPlanTest, ContextClassesOnePerPlan) {
  // SmolLM2-135M's 3 kv heads on 132 SMs, contexts up to 4096, 256-key granules.
  EXPECT_EQ(PlainContextBounds(1, 3, 4096, 132),
            (std::vector<int32_t>{256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(PlainContextBounds(8, 3, 4096, 132),  // 5 partitions at most
            (std::vector<int32_t>{256, 512, 1024, 4096}));
  EXPECT_EQ(PlainContextBounds(16, 3, 4096, 132), (std::vector<int32_t>{256, 4096}));
  EXPECT_EQ(PlainContextBounds(64, 3, 4096, 132), (std::vector<int32_t>{4096}));
  EXPECT_EQ(PlainContextBounds(1, 8, 1000, 132),  // a longest context off the grid
            (std::vector<int32_t>{256, 512, 1000}));
  EXPECT_EQ(PlainContextBounds(1, 3, 200, 132), (std::vector<int32_t>{200}));
  for (const int32_t seqs : {1, 2, 5, 8, 16, 33}) {
    const std::vector<int32_t> bounds = PlainContextBounds(seqs, 8, 8192, 132);
    ASSERT_FALSE(bounds.empty());
    EXPECT_EQ(bounds.back(), 8192);
    for (size_t i = 1; i < bounds.size(); ++i) {
      EXPECT_LT(bounds[i - 1], bounds[i]);
      EXPECT_NE(PlanDecodeSplits(seqs, 8, bounds[i - 1], 132).num_splits,
                PlanDecodeSplits(seqs, 8, bounds[i], 132).num_splits);
    }
  }
  const std::vector<int32_t> bounds = {256, 512, 4096};
  EXPECT_EQ(DecodeContextBoundFor(bounds, 0), 256);
  EXPECT_EQ(DecodeContextBoundFor(bounds, 256), 256);
  EXPECT_EQ(DecodeContextBoundFor(bounds, 257), 512);
  EXPECT_EQ(DecodeContextBoundFor(bounds, 4096), 4096);
  EXPECT_EQ(DecodeContextBoundFor(bounds, 5000), 4096);
}

// SmolLM2-135M's and Llama-3.2-1B's attention on 132 SMs.
DecodeShape Smol(int32_t rows, MergeInO merge = MergeInO::kAuto) {
  return {rows, /*num_kv_heads=*/3, /*o_input=*/9 * 64, /*num_sms=*/132, kDefaultMinPartition,
          merge};
}
DecodeShape Llama1B(int32_t rows, MergeInO merge = MergeInO::kAuto) {
  return {rows, /*num_kv_heads=*/8, /*o_input=*/32 * 64, /*num_sms=*/132, kDefaultMinPartition,
          merge};
}

void ExpectPlan(const DecodeStepPlan& plan, int32_t splits, int32_t keys, bool merged) {
  EXPECT_EQ(plan.split.num_splits, splits);
  EXPECT_EQ(plan.split.partition_size, keys);
  EXPECT_EQ(plan.merged_in_o, merged);
}

// The automatic rule: at one sequence with a small o projection input, partitions of 64 keys
// merged by the o projection wherever that makes 2..8 of them; the plain plan elsewhere.
TEST(DecodeStepPlanTest, ShortPartitionsMergedInOAtOneSmallSequence) {
  ExpectPlan(PlanDecodeStep(Smol(1), 64), 1, 0, false);     // one partition: nothing to merge
  ExpectPlan(PlanDecodeStep(Smol(1), 128), 2, 64, true);
  ExpectPlan(PlanDecodeStep(Smol(1), 256), 4, 64, true);
  ExpectPlan(PlanDecodeStep(Smol(1), 512), 8, 64, true);
  ExpectPlan(PlanDecodeStep(Smol(1), 1024), 4, 256, false);  // 16 short ones: too many
  ExpectPlan(PlanDecodeStep(Smol(1), 4096), 16, 256, false);
  // Two sequences, a large input, or the rule switched off: the plain plan.
  ExpectPlan(PlanDecodeStep(Smol(2), 256), 1, 0, false);
  ExpectPlan(PlanDecodeStep(Smol(2), 1024), 4, 256, false);
  ExpectPlan(PlanDecodeStep(Llama1B(1), 256), 1, 0, false);
  ExpectPlan(PlanDecodeStep(Llama1B(1), 1024), 4, 256, false);
  ExpectPlan(PlanDecodeStep(Smol(1, MergeInO::kNever), 256), 1, 0, false);
  ExpectPlan(PlanDecodeStep(Smol(1, MergeInO::kNever), 1024), 4, 256, false);
}

// kAlways (RTGEN_DECODE_MERGE_IN_O=1): the plain plan's partitions merged by the o projection at
// one sequence wherever there are 2..8 of them, at any input size.
TEST(DecodeStepPlanTest, AlwaysMergesThePlainPlanAtOneSequence) {
  ExpectPlan(PlanDecodeStep(Llama1B(1, MergeInO::kAlways), 256), 1, 0, false);
  ExpectPlan(PlanDecodeStep(Llama1B(1, MergeInO::kAlways), 1024), 4, 256, true);
  ExpectPlan(PlanDecodeStep(Llama1B(1, MergeInO::kAlways), 2048), 8, 256, true);
  ExpectPlan(PlanDecodeStep(Llama1B(1, MergeInO::kAlways), 4096), 16, 256, false);
  ExpectPlan(PlanDecodeStep(Llama1B(2, MergeInO::kAlways), 1024), 4, 256, false);
  DecodeShape smol = Smol(1, MergeInO::kAlways);
  smol.min_partition = 64;  // RTGEN_DECODE_MIN_PARTITION=64: session 51's A/B
  ExpectPlan(PlanDecodeStep(smol, 256), 4, 64, true);
}

// Context classes under the rule: one bound per distinct plan (partitions, granule, who merges),
// from 64 keys where the rule can apply; the plain classes where it cannot.
TEST(DecodeStepPlanTest, ContextClassesOnePerStepPlan) {
  EXPECT_EQ(DecodeStepContextBounds(Smol(1), 4096),
            (std::vector<int32_t>{64, 128, 256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(DecodeStepContextBounds(Smol(1, MergeInO::kNever), 4096),
            (std::vector<int32_t>{256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(DecodeStepContextBounds(Llama1B(1), 4096), PlainContextBounds(1, 8, 4096, 132));
  EXPECT_EQ(DecodeStepContextBounds(Smol(8), 4096), PlainContextBounds(8, 3, 4096, 132));
  // Within a class every context has its bound's plan; a merged plan has 2..8 partitions.
  for (const DecodeShape& shape : {Smol(1), Smol(1, MergeInO::kAlways), Llama1B(1)}) {
    const std::vector<int32_t> bounds = DecodeStepContextBounds(shape, 3000);
    ASSERT_EQ(bounds.back(), 3000);
    for (size_t i = 0; i < bounds.size(); ++i) {
      const DecodeStepPlan plan = PlanDecodeStep(shape, bounds[i]);
      if (plan.merged_in_o) {
        EXPECT_GE(plan.split.num_splits, 2);
        EXPECT_LE(plan.split.num_splits, kMaxSplitsMergedInO);
      }
      if (i == 0) continue;
      EXPECT_LT(bounds[i - 1], bounds[i]);
      const DecodeStepPlan before = PlanDecodeStep(shape, bounds[i - 1]);
      EXPECT_TRUE(before.split.num_splits != plan.split.num_splits ||
                  before.split.partition_size != plan.split.partition_size ||
                  before.merged_in_o != plan.merged_in_o)
          << "bounds " << bounds[i - 1] << " and " << bounds[i] << " share a plan";
    }
  }
}

TEST(DecodeStepPlanTest, MergeModeFromTheEnvironment) {
  unsetenv("RTGEN_DECODE_MERGE_IN_O");
  EXPECT_EQ(MergeInOFromEnv(), MergeInO::kAuto);
  setenv("RTGEN_DECODE_MERGE_IN_O", "1", 1);
  EXPECT_EQ(MergeInOFromEnv(), MergeInO::kAlways);
  setenv("RTGEN_DECODE_MERGE_IN_O", "0", 1);
  EXPECT_EQ(MergeInOFromEnv(), MergeInO::kNever);
  unsetenv("RTGEN_DECODE_MERGE_IN_O");
}

}  // namespace
}  // namespace rtgen::kernels
