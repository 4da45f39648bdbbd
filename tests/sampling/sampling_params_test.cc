#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kVocab = 1000;

void ExpectRejected(const SamplingParams& p, const std::string& field) {
  absl::Status s = p.Validate(kVocab);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(s.message()), HasSubstr(field));
}

TEST(SamplingParamsTest, DefaultsAreValid) {
  EXPECT_TRUE(SamplingParams{}.Validate(kVocab).ok());
  EXPECT_TRUE(StoppingParams{}.Validate(kVocab, 4, 32, 8).ok());
}

TEST(SamplingParamsTest, TemperatureMessageNamesFieldAndValue) {
  SamplingParams p;
  p.temperature = -1.0f;
  absl::Status s = p.Validate(kVocab);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "sampling.temperature must be in [0, 100], got -1");
}

TEST(SamplingParamsTest, RejectsOutOfRangeAndNonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float t : {-0.5f, 100.5f, nan, inf}) {
    SamplingParams p;
    p.temperature = t;
    ExpectRejected(p, "sampling.temperature");
  }
  for (int32_t k : {-1, kVocab + 1}) {
    SamplingParams p;
    p.top_k = k;
    ExpectRejected(p, "sampling.top_k");
  }
  for (float v : {0.0f, 1.01f, nan}) {
    SamplingParams p;
    p.top_p = v;
    ExpectRejected(p, "sampling.top_p");
  }
  for (float v : {-0.1f, 1.1f, inf}) {
    SamplingParams p;
    p.min_p = v;
    ExpectRejected(p, "sampling.min_p");
  }
  for (float v : {0.0f, 0.001f, 1e-38f, 10.5f, nan}) {
    SamplingParams p;
    p.repetition_penalty = v;
    ExpectRejected(p, "sampling.repetition_penalty");
  }
  for (float v : {-2.5f, 2.5f, -inf}) {
    SamplingParams p;
    p.presence_penalty = v;
    ExpectRejected(p, "sampling.presence_penalty");
    SamplingParams q;
    q.frequency_penalty = v;
    ExpectRejected(q, "sampling.frequency_penalty");
  }
  for (int32_t n : {-1, 21}) {
    SamplingParams p;
    p.logprobs = n;
    ExpectRejected(p, "sampling.logprobs");
  }
}

TEST(SamplingParamsTest, AcceptsRangeEnds) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = kVocab;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 10.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logprobs = 20;
  EXPECT_TRUE(p.Validate(kVocab).ok()) << p.Validate(kVocab);
  p.temperature = 100.0f;
  p.top_k = 1;
  p.repetition_penalty = 0.01f;
  EXPECT_TRUE(p.Validate(kVocab).ok());
}

TEST(SamplingParamsTest, TemperaturesBelowTheGreedyBoundAreGreedy) {
  SamplingParams p;
  for (float t : {0.0f, 1e-38f, 1e-6f, 9.9e-6f}) {
    p.temperature = t;
    EXPECT_TRUE(p.Validate(kVocab).ok()) << t;
    EXPECT_TRUE(p.greedy()) << t;
  }
  for (float t : {1e-5f, 0.7f}) {
    p.temperature = t;
    EXPECT_FALSE(p.greedy()) << t;
  }
}

absl::Status ValidateStopping(const StoppingParams& p) { return p.Validate(kVocab, 2, 8, 3); }

TEST(StoppingParamsTest, RejectsBadFieldsByName) {
  StoppingParams p;
  p.max_tokens = 0;
  EXPECT_THAT(std::string(ValidateStopping(p).message()), HasSubstr("stopping.max_tokens"));

  StoppingParams too_many;
  too_many.stop = {"a", "b", "c"};
  EXPECT_THAT(std::string(ValidateStopping(too_many).message()), HasSubstr("stopping.stop"));

  StoppingParams empty;
  empty.stop = {"ok", ""};
  EXPECT_THAT(std::string(ValidateStopping(empty).message()), HasSubstr("stopping.stop[1]"));

  StoppingParams long_one;
  long_one.stop = {"123456789"};
  EXPECT_THAT(std::string(ValidateStopping(long_one).message()), HasSubstr("stopping.stop[0]"));

  for (std::string bad : {std::string("\xC3"), std::string("\xC0\xAF"), std::string("\xED\xA0\x80"),
                          std::string("a\xFF")}) {
    StoppingParams p8;
    p8.stop = {bad};
    absl::Status s = ValidateStopping(p8);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("UTF-8"));
  }

  StoppingParams many_ids;
  many_ids.stop_token_ids = {1, 2, 3, 4};
  EXPECT_THAT(std::string(ValidateStopping(many_ids).message()),
              HasSubstr("stopping.stop_token_ids has 4 ids, at most 3 allowed"));

  for (int32_t id : {-1, kVocab}) {
    StoppingParams ids;
    ids.stop_token_ids = {5, id};
    absl::Status s = ValidateStopping(ids);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("stopping.stop_token_ids[1]"));
  }
}

TEST(StoppingParamsTest, AcceptsValidUtf8AndIds) {
  StoppingParams p;
  p.stop = {"\xC3\xA9t\xC3\xA9", "\xF0\x9F\x98\x80"};  // "été", an emoji
  p.stop_token_ids = {0, kVocab - 1};
  EXPECT_TRUE(ValidateStopping(p).ok()) << ValidateStopping(p);
}

}  // namespace
}  // namespace rtgen
