// The host side of device penalties (kernels/sample_penalties.h), without a GPU: the entries a
// row gets, their pending token, the refusals, the rows the device takes, and that the entries
// carry what the CPU sampler's penalties read — put through a C++ copy of the device's
// arithmetic (kernels/sampling.cu Penalized), they give its penalized logits bit for bit. The
// kernel itself, and its pending token, are tested on the GPU (tests/kernels/sampling_test.cc).

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "engine/pending_token.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "kernels/sample_penalties.h"

namespace rtgen::kernels {
namespace {

SamplingParams Penalties(float repetition, float presence, float frequency) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = repetition;
  p.presence_penalty = presence;
  p.frequency_penalty = frequency;
  return p;
}

// entries[begin, ...) hold `want`'s (token, output count) pairs, in order.
void ExpectEntries(const std::vector<SamplePenaltyEntry>& entries, int32_t begin,
                   const std::vector<std::pair<int32_t, int32_t>>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(entries[begin + i].token, want[i].first) << i;
    EXPECT_EQ(entries[begin + i].output_count, want[i].second) << i;
  }
}

TEST(SamplePenaltiesTest, OneEntryPerDistinctTokenWithItsOutputCount) {
  PenaltyEntryBuilder builder(100);
  const std::vector<int32_t> prompt = {5, 7, 5, 100, -3, 9};  // 100 is outside the vocabulary
  const std::vector<int32_t> output = {7, 7, 11, 5, 250};
  std::vector<SamplePenaltyEntry> entries(16);
  int32_t used = 3;  // rows before this one
  SampleRowParams rp;
  const SamplingParams params = Penalties(1.2f, 0.5f, 0.25f);
  ASSERT_TRUE(builder.Append(params, prompt, output, -1, entries, &used, &rp).ok());
  EXPECT_EQ(used, 3 + 4);
  EXPECT_EQ(rp.penalty_begin, 3);
  EXPECT_EQ(rp.penalty_count, 4);
  EXPECT_EQ(rp.penalty_pending, -1);
  EXPECT_EQ(rp.repetition_penalty, 1.2f);
  EXPECT_EQ(rp.presence_penalty, 0.5f);
  EXPECT_EQ(rp.frequency_penalty, 0.25f);
  ExpectEntries(entries, 3, {{5, 1}, {7, 2}, {9, 0}, {11, 1}});
  // The next row starts clean: no count of the first carries over.
  SampleRowParams next;
  const std::vector<int32_t> p2 = {7}, o2 = {9, 9};
  ASSERT_TRUE(builder.Append(params, p2, o2, -1, entries, &used, &next).ok());
  EXPECT_EQ(next.penalty_begin, 7);
  ASSERT_EQ(next.penalty_count, 2);
  ExpectEntries(entries, 7, {{7, 0}, {9, 2}});
}

TEST(SamplePenaltiesTest, WithoutARepetitionPenaltyThePromptIsNoEntry) {
  PenaltyEntryBuilder builder(100);
  const std::vector<int32_t> prompt = {5, 7}, output = {7, 8, 8};
  std::vector<SamplePenaltyEntry> entries(8);
  int32_t used = 0;
  SampleRowParams rp;
  ASSERT_TRUE(builder.Append(Penalties(1.0f, 0.5f, 0.1f), prompt, output, -1, entries, &used, &rp)
                  .ok());
  ASSERT_EQ(rp.penalty_count, 2);
  ExpectEntries(entries, 0, {{7, 1}, {8, 2}});
}

TEST(SamplePenaltiesTest, APendingLastTokenIsLeftToTheDevice) {
  PenaltyEntryBuilder builder(50);
  const SamplingParams params = Penalties(1.3f, 0.0f, 0.0f);
  const std::vector<int32_t> prompt = {1, 2};
  std::vector<SamplePenaltyEntry> entries(8);
  int32_t used = 0;
  SampleRowParams rp;
  const std::vector<int32_t> output = {3, PendingToken(4)};
  ASSERT_TRUE(builder.Append(params, prompt, output, 6, entries, &used, &rp).ok());
  EXPECT_EQ(rp.penalty_pending, 6);
  EXPECT_EQ(rp.penalty_count, 3);  // 1, 2, 3: the pending one is not an entry

  const absl::Status no_row = builder.Append(params, prompt, output, -1, entries, &used, &rp);
  EXPECT_EQ(no_row.code(), absl::StatusCode::kInvalidArgument) << no_row;
  const std::vector<int32_t> middle = {PendingToken(0), 3};
  const absl::Status in_middle = builder.Append(params, prompt, middle, 6, entries, &used, &rp);
  EXPECT_EQ(in_middle.code(), absl::StatusCode::kInvalidArgument) << in_middle;
  EXPECT_NE(in_middle.message().find("output token 0 of 2 is pending"), std::string::npos);
  EXPECT_EQ(used, 3);  // refusals append nothing
}

TEST(SamplePenaltiesTest, RefusesARowWithoutRoomAndStaysUsable) {
  PenaltyEntryBuilder builder(50);
  const SamplingParams params = Penalties(1.1f, 0.0f, 0.0f);
  std::vector<SamplePenaltyEntry> entries(4);
  int32_t used = 2;
  SampleRowParams rp;
  const std::vector<int32_t> three = {4, 5, 6};
  const absl::Status full = builder.Append(params, three, {}, -1, entries, &used, &rp);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(used, 2);
  const std::vector<int32_t> two = {5, 4};
  ASSERT_TRUE(builder.Append(params, two, {}, -1, entries, &used, &rp).ok());
  EXPECT_EQ(used, 4);
  ExpectEntries(entries, 2, {{5, 0}, {4, 0}});
}

TEST(SamplePenaltiesTest, DeviceRowsAreThoseWithPenaltiesWithinTheTokenLimit) {
  EXPECT_FALSE(HasPenalties(SamplingParams{}));
  EXPECT_TRUE(HasPenalties(Penalties(0.9f, 0.0f, 0.0f)));
  EXPECT_TRUE(HasPenalties(Penalties(1.0f, -0.1f, 0.0f)));
  EXPECT_TRUE(HasPenalties(Penalties(1.0f, 0.0f, 2.0f)));
  const SamplingParams p = Penalties(1.2f, 0.0f, 0.0f);
  EXPECT_TRUE(PenalizesOnDevice(p, 4000, 96, 4096));
  EXPECT_FALSE(PenalizesOnDevice(p, 4000, 97, 4096));
  // Presence and frequency read the output only: the prompt does not count.
  EXPECT_TRUE(PenalizesOnDevice(Penalties(1.0f, 0.2f, 0.0f), 100000, 4096, 4096));
  EXPECT_FALSE(PenalizesOnDevice(Penalties(1.0f, 0.2f, 0.0f), 0, 4097, 4096));
  EXPECT_FALSE(PenalizesOnDevice(p, 1, 0, 0));  // 0: never on the device
  EXPECT_FALSE(PenalizesOnDevice(SamplingParams{}, 1, 0, 4096));
}

// What the device sampler computes for one entry (kernels/sampling.cu Penalized), in C++: the
// same operations in the same order, each rounded once.
float DevicePenalized(float x, const SampleRowParams& rp, int32_t count) {
  if (rp.repetition_penalty != 1.0f) {
    x = x > 0.0f ? x / rp.repetition_penalty : x * rp.repetition_penalty;
  }
  if (count > 0 && (rp.presence_penalty != 0.0f || rp.frequency_penalty != 0.0f)) {
    x = x - std::fma(rp.frequency_penalty, static_cast<float>(count), rp.presence_penalty);
  }
  return x;
}

TEST(SamplePenaltiesTest, EntriesGiveTheCpuSamplersPenalizedLogitsBitForBit) {
  const int32_t vocab = 300;
  std::mt19937_64 rng(20261203);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  std::uniform_int_distribution<int32_t> id(0, vocab + 9);  // some outside the vocabulary
  PenaltyEntryBuilder builder(vocab);
  const std::vector<SamplingParams> configs = {Penalties(1.3f, 0.0f, 0.0f),
                                               Penalties(1.0f, 0.7f, 0.3f),
                                               Penalties(0.6f, -1.5f, 1.9f)};
  for (int trial = 0; trial < 60; ++trial) {
    const SamplingParams& params = configs[trial % configs.size()];
    std::vector<int32_t> prompt(rng() % 120), output(rng() % 80);
    for (int32_t& t : prompt) t = id(rng);
    for (int32_t& t : output) t = id(rng);
    std::vector<float> logits(vocab);
    for (float& l : logits) l = logit(rng);
    std::vector<SamplePenaltyEntry> entries(prompt.size() + output.size());
    int32_t used = 0;
    SampleRowParams rp;
    ASSERT_TRUE(builder.Append(params, prompt, output, -1, entries, &used, &rp).ok());
    std::vector<float> device = logits;
    for (int32_t j = 0; j < rp.penalty_count; ++j) {
      const SamplePenaltyEntry& e = entries[rp.penalty_begin + j];
      device[e.token] = DevicePenalized(device[e.token], rp, e.output_count);
    }
    std::vector<float> cpu = logits;
    SampleToken(cpu, params, prompt, output, 0);  // greedy: penalizes `cpu` in place
    ASSERT_EQ(std::memcmp(device.data(), cpu.data(), sizeof(float) * vocab), 0) << trial;
  }
}

}  // namespace
}  // namespace rtgen::kernels
