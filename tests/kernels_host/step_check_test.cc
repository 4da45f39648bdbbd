// The CUDA backend's check of a step's input (kernels/step_check.h), without a GPU: well-formed
// prefill, decode and pipelined decode steps pass; each malformed one is refused with an error
// that names the field and the entry. On the GPU the backend runs the same check before every
// step (tests/kernels/cuda_backend_test.cc).

#include "kernels/step_check.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/pending_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

using ::testing::HasSubstr;

constexpr CudaStepLimits kLimits{.max_tokens = 64,
                                 .max_seqs = 4,
                                 .max_blocks_per_seq = 4,
                                 .block_size = 16,
                                 .num_blocks = 10,
                                 .vocab_size = 100};

const SamplingParams kGreedy;

// The previous step sampled one row on the device: PendingToken(0) names its logits row 3.
int32_t PendingRow(int32_t id) { return PendingSampleIndex(id) == 0 ? 3 : -1; }

// Sequence 0: tokens at positions 0..4 in block 2; sequence 1: positions 10..12 in block 3.
StepInput Prefill() {
  StepInput in;
  in.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  in.positions = {0, 1, 2, 3, 4, 10, 11, 12};
  in.slot_mapping = {32, 33, 34, 35, 36, 58, 59, 60};
  in.query_start = {0, 5, 8};
  in.context_lens = {5, 13};
  in.max_blocks_per_seq = 2;
  in.block_tables = {2, -1, 3, -1};
  in.samples = {SampleRequest{0, &kGreedy, {}, {}, 1}, SampleRequest{1, &kGreedy, {}, {}, 2}};
  return in;
}

// Sequence 0 at its position 5 (block 2), sequence 1 at 17 (blocks 3, 4).
StepInput Decode() {
  StepInput in;
  in.token_ids = {9, PendingToken(0)};
  in.positions = {5, 17};
  in.slot_mapping = {37, 65};
  in.query_start = {0, 1, 2};
  in.context_lens = {6, 18};
  in.max_blocks_per_seq = 2;
  in.block_tables = {2, -1, 3, 4};
  in.is_decode_only = true;
  in.samples = {SampleRequest{0, &kGreedy, {}, {}, 1}, SampleRequest{1, &kGreedy, {}, {}, 2}};
  return in;
}

absl::Status Check(const StepInput& in) { return CheckCudaStep(in, kLimits, PendingRow); }

TEST(CudaStepCheckTest, WellFormedStepsPass) {
  EXPECT_TRUE(Check(Prefill()).ok()) << Check(Prefill());
  EXPECT_TRUE(Check(Decode()).ok()) << Check(Decode());
  StepInput unstored = Decode();
  unstored.slot_mapping = {-1, -1};  // a decode row may store nothing
  EXPECT_TRUE(Check(unstored).ok()) << Check(unstored);
  StepInput no_samples = Prefill();
  no_samples.samples.clear();
  EXPECT_TRUE(Check(no_samples).ok()) << Check(no_samples);
  StepInput prefill_unstored = Prefill();
  prefill_unstored.slot_mapping[3] = -1;  // a prompt token may store nothing too
  EXPECT_TRUE(Check(prefill_unstored).ok()) << Check(prefill_unstored);
}

SamplingParams With(void (*set)(SamplingParams&)) {
  SamplingParams p;
  set(p);
  return p;
}
const SamplingParams kZeroRepetitionPenalty =
    With([](SamplingParams& p) { p.repetition_penalty = 0.0f; });
const SamplingParams kTopKPastVocab = With([](SamplingParams& p) { p.top_k = 101; });

struct Bad {
  const char* what;
  std::function<void(StepInput&)> mutate;
  bool decode;        // mutates Decode(), else Prefill()
  const char* error;  // a part of the message
};

void PrintTo(const Bad& bad, std::ostream* os) { *os << bad.what; }

class CudaStepCheckBadTest : public ::testing::TestWithParam<Bad> {};

TEST_P(CudaStepCheckBadTest, IsRefusedByName) {
  StepInput in = GetParam().decode ? Decode() : Prefill();
  GetParam().mutate(in);
  const absl::Status st = Check(in);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << GetParam().what << ": " << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(GetParam().error)) << GetParam().what;
}

INSTANTIATE_TEST_SUITE_P(
    Steps, CudaStepCheckBadTest,
    ::testing::Values(
        Bad{"no tokens", [](StepInput& in) { in = StepInput(); }, false, "step has 0 tokens"},
        Bad{"too many tokens",
            [](StepInput& in) {
              in.token_ids.resize(65, 1);
              in.positions.resize(65, 0);
              in.slot_mapping.resize(65, -1);
              in.query_start.back() = 65;
            },
            false, "step has 65 tokens; the CUDA backend takes 1..64"},
        Bad{"too many sequences",
            [](StepInput& in) {
              in.context_lens.resize(5, 0);
              in.query_start = {0, 5, 8, 8, 8, 8};
              in.block_tables.resize(10, -1);
            },
            false, "step has 5 sequences; the CUDA backend takes 1..4"},
        Bad{"positions short", [](StepInput& in) { in.positions.pop_back(); }, false,
            "positions and slot_mapping must have one entry per token"},
        Bad{"query_start end", [](StepInput& in) { in.query_start.back() = 7; }, false,
            "query_start must have num_seqs + 1 entries"},
        Bad{"block table size", [](StepInput& in) { in.block_tables.pop_back(); }, false,
            "block_tables must be num_seqs x max_blocks_per_seq"},
        Bad{"block table too wide",
            [](StepInput& in) {
              in.max_blocks_per_seq = 5;
              in.block_tables = {2, -1, -1, -1, -1, 3, -1, -1, -1, -1};
            },
            false, "max_blocks_per_seq <= 4"},
        Bad{"context past the table", [](StepInput& in) { in.context_lens[0] = 33; }, false,
            "context_lens[0] = 33 does not fit its block table"},
        Bad{"block outside the pool", [](StepInput& in) { in.block_tables[2] = 10; }, false,
            "block_tables[1][0] = 10 is not a block of the pool"},
        Bad{"block missing", [](StepInput& in) { in.block_tables[3] = -1; }, true,
            "block_tables[1][1] = -1 is not a block of the pool"},
        Bad{"position past the context", [](StepInput& in) { in.positions[2] = 7; }, false,
            "positions[2] = 7 is outside its context of 5"},
        Bad{"negative position", [](StepInput& in) { in.positions[6] = -1; }, false,
            "positions[6] = -1 is outside its context of 13"},
        Bad{"slot outside the pool", [](StepInput& in) { in.slot_mapping[1] = 160; }, false,
            "slot_mapping[1] = 160 is outside the pool"},
        Bad{"slot below -1", [](StepInput& in) { in.slot_mapping[0] = -2; }, false,
            "slot_mapping[0] = -2 is outside the pool"},
        Bad{"prompt token stored elsewhere in its block",
            [](StepInput& in) { in.slot_mapping[6] = 57; }, false,
            "slot_mapping[6] = 57 must be -1 or the slot of position 11 through its block table "
            "(59)"},
        Bad{"prompt token stored in another sequence's block",
            [](StepInput& in) { in.slot_mapping[0] = 58; }, false,
            "slot_mapping[0] = 58 must be -1 or the slot of position 0 through its block table "
            "(32)"},
        Bad{"position repeated within a prompt",
            [](StepInput& in) {
              in.positions[1] = 0;
              in.slot_mapping[1] = 32;
            },
            false, "slot_mapping[1] = 32 is also slot_mapping[0]: one step stores one token a "
                   "slot"},
        Bad{"two decode rows writing one shared block",
            [](StepInput& in) {  // both sequences at position 5 of block 2
              in.positions = {5, 5};
              in.slot_mapping = {37, 37};
              in.context_lens = {6, 6};
              in.block_tables = {2, -1, 2, -1};
            },
            true, "slot_mapping[1] = 37 is also slot_mapping[0]"},
        Bad{"query_start past the tokens", [](StepInput& in) { in.query_start[1] = 9; }, false,
            "query_start of sequence 0 is bad"},
        Bad{"token past the vocabulary", [](StepInput& in) { in.token_ids[4] = 100; }, false,
            "token_ids[4] = 100 is outside the vocabulary [0, 100)"},
        Bad{"decode row of two tokens",
            [](StepInput& in) {
              in.token_ids = {9, 9, 9};
              in.positions = {4, 5, 17};
              in.slot_mapping = {36, 37, 65};
              in.query_start = {0, 2, 3};
            },
            true, "query_start of sequence 0 is bad"},
        Bad{"decode at an older position", [](StepInput& in) { in.positions[1] = 16; }, true,
            "positions[1] = 16 in a decode-only step must be its context's last position, 17"},
        Bad{"decode stored elsewhere", [](StepInput& in) { in.slot_mapping[0] = 36; }, true,
            "slot_mapping[0] = 36 in a decode-only step must be -1 or the slot of position 5 "
            "(37)"},
        Bad{"pending token not sampled", [](StepInput& in) { in.token_ids[1] = PendingToken(1); },
            true, "names sample 1 of the previous step"},
        Bad{"sample of no sequence", [](StepInput& in) { in.samples[1].seq_index = 2; }, false,
            "samples[1] has a bad seq_index or no params"},
        Bad{"sample without params", [](StepInput& in) { in.samples[0].params = nullptr; },
            false, "samples[0] has a bad seq_index or no params"},
        Bad{"sample of a sequence without tokens",
            [](StepInput& in) {
              in.context_lens.push_back(1);
              in.query_start.push_back(8);
              in.block_tables.insert(in.block_tables.end(), {5, -1});
              in.samples.push_back(SampleRequest{2, &kGreedy, {}, {}, 3});
            },
            false, "samples[2] names sequence 2 with no tokens"},
        Bad{"two samples of one sequence",
            [](StepInput& in) { in.samples[1].seq_index = 0; }, false,
            "samples[1] names sequence 0, as samples[0] does: one sample a sequence"},
        Bad{"sample with a repetition penalty of 0",
            [](StepInput& in) { in.samples[1].params = &kZeroRepetitionPenalty; }, false,
            "samples[1].params: sampling.repetition_penalty"},
        Bad{"sample with top_k past the vocabulary",
            [](StepInput& in) { in.samples[0].params = &kTopKPastVocab; }, true,
            "samples[0].params: sampling.top_k"},
        Bad{"more samples than rows",
            [](StepInput& in) {
              for (int i = 0; i < 3; ++i) in.samples.push_back(in.samples[0]);
            },
            false, "more samples than the CUDA backend's max_num_seqs"}));

}  // namespace
}  // namespace rtgen
