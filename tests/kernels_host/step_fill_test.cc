// How the CUDA backend fills a step's pinned arrays (kernels/step_fill.h), without a GPU: the
// step's own rows (a pending token as its logits row), a graph's padding rows and sequences (no
// KV write, no keys, greedy unread samples), a mixed step's decode rows marked for decode
// attention, and the logits rows a decode graph, an eager step and a prefill graph compute.
// The arrays' upload and the kernels that read them are tested on the GPU
// (tests/kernels/step_buffers_test.cc, mixed_graph_test.cc).

#include "kernels/step_fill.h"

#include <cstdint>
#include <vector>

#include "engine/pending_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int32_t kTokens = 8, kSeqs = 4, kWidth = 3;
constexpr int32_t kUntouched = 77;  // every array starts filled with it

// A layout of kTokens rows and kSeqs sequences over host vectors.
struct HostArrays {
  std::vector<int32_t> token_ids, positions, slots, token_seq, attention_positions;
  std::vector<int32_t> context_lens, decode_context_lens, sample_rows, block_tables;
  std::vector<kernels::SampleRowParams> params;
  StepArrays h;

  HostArrays()
      : token_ids(kTokens, kUntouched),
        positions(kTokens, kUntouched),
        slots(kTokens, kUntouched),
        token_seq(kTokens, kUntouched),
        attention_positions(kTokens, kUntouched),
        context_lens(kSeqs, kUntouched),
        decode_context_lens(kSeqs, kUntouched),
        sample_rows(kSeqs, kUntouched),
        block_tables(kSeqs * kWidth, kUntouched),
        params(kSeqs) {
    for (kernels::SampleRowParams& p : params) p.temperature = 0.7f;
    h.token_ids = token_ids.data();
    h.positions = positions.data();
    h.slot_mapping = slots.data();
    h.token_seq = token_seq.data();
    h.attention_positions = attention_positions.data();
    h.context_lens = context_lens.data();
    h.decode_context_lens = decode_context_lens.data();
    h.sample_rows = sample_rows.data();
    h.sample_params = params.data();
    h.block_tables = block_tables.data();
  }
};

// Sequences 0 and 1 decode one token each (1's is pending: sample 1 of the step before); 2 is a
// three-token prefill chunk at positions 4..6. Blocks of 16 tokens, two a sequence.
StepInput Mixed() {
  StepInput in;
  in.token_ids = {11, PendingToken(1), 21, 22, 23};
  in.positions = {20, 9, 4, 5, 6};
  in.slot_mapping = {36, 73, 100, 101, 102};
  in.query_start = {0, 1, 2, 5};
  in.context_lens = {21, 10, 7};
  in.max_blocks_per_seq = 2;
  in.block_tables = {1, 2, 4, -1, 6, -1};
  return in;
}

TEST(StepFillTest, FillsTheStepsRowsAndNamesPendingTokensByTheirLogitsRow) {
  HostArrays a;
  FillStepInputs(Mixed(), a.h, kWidth, [](int32_t id) { return 5 + PendingSampleIndex(id); });
  EXPECT_THAT(a.token_ids, ElementsAre(11, -1 - 6, 21, 22, 23, kUntouched, kUntouched,
                                       kUntouched));
  EXPECT_THAT(std::vector<int32_t>(a.positions.begin(), a.positions.begin() + 5),
              ElementsAre(20, 9, 4, 5, 6));
  EXPECT_THAT(std::vector<int32_t>(a.slots.begin(), a.slots.begin() + 5),
              ElementsAre(36, 73, 100, 101, 102));
  EXPECT_THAT(a.token_seq, ElementsAre(0, 1, 2, 2, 2, kUntouched, kUntouched, kUntouched));
  EXPECT_THAT(a.context_lens, ElementsAre(21, 10, 7, kUntouched));
  // Rows of the step's width (2) in a table of width 3: the third column is left as it was.
  EXPECT_THAT(a.block_tables, ElementsAre(1, 2, kUntouched, 4, -1, kUntouched, 6, -1,
                                          kUntouched, kUntouched, kUntouched, kUntouched));
}

TEST(StepFillTest, DecodePaddingRowsAreSequencesOfTheirOwnThatWriteNothing) {
  HostArrays a;
  PadRows(a.h, 2, 5, /*prefill=*/false);
  for (int32_t t = 2; t < 5; ++t) {
    EXPECT_EQ(a.token_ids[t], 0) << t;
    EXPECT_EQ(a.positions[t], 0) << t;
    EXPECT_EQ(a.slots[t], -1) << t;  // no KV write
    EXPECT_EQ(a.token_seq[t], t) << t;
    EXPECT_EQ(a.attention_positions[t], 0) << t;
  }
  EXPECT_EQ(a.slots[1], kUntouched);
  EXPECT_EQ(a.slots[5], kUntouched);
}

TEST(StepFillTest, PrefillPaddingRowsHaveNoPositionAndBelongToSequenceZero) {
  HostArrays a;
  PadRows(a.h, 5, 8, /*prefill=*/true);
  EXPECT_THAT(std::vector<int32_t>(a.positions.begin() + 5, a.positions.end()),
              ElementsAre(-1, -1, -1));
  EXPECT_THAT(std::vector<int32_t>(a.attention_positions.begin() + 5, a.attention_positions.end()),
              ElementsAre(-1, -1, -1));
  EXPECT_THAT(std::vector<int32_t>(a.slots.begin() + 5, a.slots.end()), ElementsAre(-1, -1, -1));
  EXPECT_THAT(std::vector<int32_t>(a.token_seq.begin() + 5, a.token_seq.end()),
              ElementsAre(0, 0, 0));
  EXPECT_EQ(a.positions[4], kUntouched);
}

TEST(StepFillTest, PaddingSequencesHaveNoKeysAndSampleGreedily) {
  HostArrays a;
  PadSeqs(a.h, 1, 3, /*prefill=*/false);
  EXPECT_THAT(a.context_lens, ElementsAre(kUntouched, 0, 0, kUntouched));
  EXPECT_THAT(a.decode_context_lens, ElementsAre(kUntouched, 0, 0, kUntouched));
  EXPECT_THAT(a.sample_rows, ElementsAre(kUntouched, 1, 2, kUntouched));  // row q
  EXPECT_EQ(a.params[1].temperature, 0.0f);
  EXPECT_EQ(a.params[2].temperature, 0.0f);
  EXPECT_EQ(a.params[3].temperature, 0.7f);
  HostArrays p;
  PadSeqs(p.h, 2, 4, /*prefill=*/true);
  EXPECT_THAT(p.sample_rows, ElementsAre(kUntouched, kUntouched, 0, 0));  // token row 0
}

TEST(StepFillTest, MixedStepsDecodeRowsGoToDecodeAttention) {
  HostArrays a;
  MarkDecodeRows(Mixed(), a.h, kSeqs);
  EXPECT_THAT(a.decode_context_lens, ElementsAre(21, 10, 0, 0));
  EXPECT_THAT(std::vector<int32_t>(a.attention_positions.begin(),
                                   a.attention_positions.begin() + 5),
              ElementsAre(kernels::kPrefillKeepRow, kernels::kPrefillKeepRow, 4, 5, 6));
}

TEST(StepFillTest, OneTokenRowsOutOfOrderOrNotNewestStayPrefillAttentions) {
  // Sequence 0 has one token at row 0, but at position 5 of a 9-token context (not its newest);
  // sequence 1 is a prefill chunk at rows 1..3; sequence 2 has its newest token at row 4, not 2.
  StepInput in;
  in.token_ids = {1, 2, 3, 4, 5};
  in.positions = {5, 0, 1, 2, 30};
  in.slot_mapping = {5, 16, 17, 18, 78};
  in.query_start = {0, 1, 4, 5};
  in.context_lens = {9, 3, 31};
  in.max_blocks_per_seq = 2;
  in.block_tables = {0, -1, 1, -1, 3, 4};
  HostArrays a;
  MarkDecodeRows(in, a.h, 3);
  EXPECT_THAT(std::vector<int32_t>(a.decode_context_lens.begin(),
                                   a.decode_context_lens.begin() + 3),
              ElementsAre(0, 0, 0));
  EXPECT_THAT(std::vector<int32_t>(a.attention_positions.begin(),
                                   a.attention_positions.begin() + 5),
              ElementsAreArray(in.positions));
}

SampleRequest SampleOf(int32_t seq) {
  static const SamplingParams kGreedy;
  return SampleRequest{seq, &kGreedy, {}, {}, 0};
}

TEST(StepFillTest, DecodeGraphComputesEveryBucketRowOnItsOwnToken) {
  StepInput in = Mixed();  // its layout matters not: a decode bucket's rows are rows 0..3
  in.samples = {SampleOf(0), SampleOf(1)};
  HostArrays a;
  std::vector<int32_t> sample_row;
  bool in_order = false;
  EXPECT_EQ(FillSampleRows(in, 4, 0, a.h, &sample_row, &in_order), 4);
  EXPECT_THAT(a.sample_rows, ElementsAre(0, 1, 2, 3));
  for (const kernels::SampleRowParams& p : a.params) EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_THAT(sample_row, ElementsAre(0, 1));
  EXPECT_TRUE(in_order);
}

TEST(StepFillTest, EagerStepComputesEachSamplesLastToken) {
  StepInput in = Mixed();
  in.samples = {SampleOf(0), SampleOf(2)};  // sequence 2's last token is row 4
  HostArrays a;
  std::vector<int32_t> sample_row;
  bool in_order = true;
  EXPECT_EQ(FillSampleRows(in, 0, 0, a.h, &sample_row, &in_order), 2);
  EXPECT_THAT(a.sample_rows, ElementsAre(0, 4, kUntouched, kUntouched));
  EXPECT_THAT(sample_row, ElementsAre(0, 1));
  EXPECT_FALSE(in_order);
  EXPECT_EQ(a.params[0].temperature, 0.7f);  // a sample's parameters are set after
  in.samples = {SampleOf(0), SampleOf(1)};  // rows 0 and 1: in token order
  EXPECT_EQ(FillSampleRows(in, 0, 0, a.h, &sample_row, &in_order), 2);
  EXPECT_TRUE(in_order);
}

TEST(StepFillTest, PrefillGraphComputesItsVariantsRowsPastTheSamplesOnRowZero) {
  StepInput in = Mixed();
  in.samples = {SampleOf(2)};
  HostArrays a;
  std::vector<int32_t> sample_row;
  bool in_order = true;
  EXPECT_EQ(FillSampleRows(in, 0, 3, a.h, &sample_row, &in_order), 3);
  EXPECT_THAT(a.sample_rows, ElementsAre(4, 0, 0, kUntouched));
  EXPECT_EQ(a.params[0].temperature, 0.7f);
  EXPECT_EQ(a.params[1].temperature, 0.0f);
  EXPECT_EQ(a.params[2].temperature, 0.0f);
  EXPECT_THAT(sample_row, ElementsAre(0));
  EXPECT_FALSE(in_order);
}

}  // namespace
}  // namespace rtgen
