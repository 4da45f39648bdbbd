// The GPU path's A/B switches read their environment variables strictly: "0" / "1" (and the
// words a switch names), whole decimal integers, one of a switch's words (EnvChoice); anything
// else is reported on stderr once and taken as the default, so a typo cannot pass for a setting
// ("off" read as on, "true" as off, "0x18" as 0, "ALL" as the default without a word).

#include "kernels/env_switch.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen::kernels {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Sets `name` to `value` (unset when null) for one check; each check uses its own name, since
// the report is once a variable.
void Set(const char* name, const char* value) {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
}

TEST(EnvSwitchTest, OnUnlessZeroTakesZeroAndOne) {
  Set("RTGEN_TEST_SWITCH_A", nullptr);
  EXPECT_TRUE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_A"));
  EXPECT_FALSE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_A", false));
  Set("RTGEN_TEST_SWITCH_A", "0");
  EXPECT_FALSE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_A"));
  Set("RTGEN_TEST_SWITCH_A", "1");
  EXPECT_TRUE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_A", false));
}

TEST(EnvSwitchTest, AnUnknownValueIsReportedOnceAndTakenAsTheDefault) {
  Set("RTGEN_TEST_SWITCH_B", "off");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_B"));  // "off" is no "0": the default, on
  EXPECT_TRUE(EnvOnUnlessZero("RTGEN_TEST_SWITCH_B"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("RTGEN_TEST_SWITCH_B='off' is not a value it takes; using the "
                             "default (on)"));
  EXPECT_EQ(err.find("RTGEN_TEST_SWITCH_B"), err.rfind("RTGEN_TEST_SWITCH_B"));  // once
}

TEST(EnvSwitchTest, OptInIsOnOnlyForOne) {
  Set("RTGEN_TEST_SWITCH_C", nullptr);
  EXPECT_FALSE(EnvOptIn("RTGEN_TEST_SWITCH_C"));
  Set("RTGEN_TEST_SWITCH_C", "1");
  EXPECT_TRUE(EnvOptIn("RTGEN_TEST_SWITCH_C"));
  Set("RTGEN_TEST_SWITCH_C", "true");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(EnvOptIn("RTGEN_TEST_SWITCH_C"));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("RTGEN_TEST_SWITCH_C='true' is not a value it takes; using the default "
                        "(off)"));
}

TEST(EnvSwitchTest, IntegersAreWholeDecimalNumbers) {
  Set("RTGEN_TEST_SWITCH_D", nullptr);
  EXPECT_EQ(EnvInt("RTGEN_TEST_SWITCH_D", 24), 24);
  Set("RTGEN_TEST_SWITCH_D", "");
  EXPECT_EQ(EnvInt("RTGEN_TEST_SWITCH_D", 24), 24);
  Set("RTGEN_TEST_SWITCH_D", "-3");
  EXPECT_EQ(EnvInt("RTGEN_TEST_SWITCH_D", 24), -3);
  Set("RTGEN_TEST_SWITCH_D", "0");
  EXPECT_EQ(EnvInt("RTGEN_TEST_SWITCH_D", 24), 0);
  for (const char* bad : {"0x18", "four", "12k", "99999999999999999999"}) {
    const std::string name = std::string("RTGEN_TEST_SWITCH_INT_") + std::to_string(bad[1]);
    Set(name.c_str(), bad);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(EnvInt(name.c_str(), 24), 24) << bad;
    EXPECT_THAT(::testing::internal::GetCapturedStderr(),
                HasSubstr(name + "='" + bad + "' is not a value it takes; using the default (24)"));
  }
}

TEST(EnvSwitchTest, AChoiceIsOneOfItsWordsOrTheDefault) {
  Set("RTGEN_TEST_SWITCH_E", nullptr);
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_E", {"0", "1", "all"}), -1);
  Set("RTGEN_TEST_SWITCH_E", "");
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_E", {"0", "1", "all"}), -1);
  Set("RTGEN_TEST_SWITCH_E", "0");
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_E", {"0", "1", "all"}), 0);
  Set("RTGEN_TEST_SWITCH_E", "all");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_E", {"0", "1", "all"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
  for (const char* bad : {"ALL", "on", "1 "}) {
    const std::string name = std::string("RTGEN_TEST_SWITCH_WORD_") + std::to_string(bad[1]);
    Set(name.c_str(), bad);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(EnvChoice(name.c_str(), {"0", "1", "all"}), -1) << bad;
    EXPECT_THAT(::testing::internal::GetCapturedStderr(),
                HasSubstr(name + "='" + bad + "' is not a value it takes; using the default"));
  }
}

// A switch whose default is one of its words gets that word's index when unset, empty or
// unknown, and its report names the word: the call sites mapped -1 to it each in a lambda.
TEST(EnvSwitchTest, AChoiceWithADefaultWordTakesThatWord) {
  Set("RTGEN_TEST_SWITCH_F", nullptr);
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_F", {"0", "1", "all"}, 1), 1);
  Set("RTGEN_TEST_SWITCH_F", "");
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_F", {"0", "1", "all"}, 1), 1);
  Set("RTGEN_TEST_SWITCH_F", "0");
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_F", {"0", "1", "all"}, 1), 0);
  Set("RTGEN_TEST_SWITCH_F", "every");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvChoice("RTGEN_TEST_SWITCH_F", {"0", "1", "all"}, 1), 1);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("RTGEN_TEST_SWITCH_F='every' is not a value it takes; using the default "
                        "(1)"));
}

// A number outside a switch's range or set is reported and taken as the default: the switches
// checked their ranges themselves and fell back silently (RTGEN_DECODE_MMA_WARPS=6).
TEST(EnvSwitchTest, ANumberOutsideItsRangeOrSetIsReported) {
  Set("RTGEN_TEST_SWITCH_G", nullptr);
  EXPECT_EQ(EnvIntIn("RTGEN_TEST_SWITCH_G", 1, 4, 2), 2);
  // Unset with a fallback outside the range (a caller's own default): taken, nothing said.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntIn("RTGEN_TEST_SWITCH_G", 1, 4, 32), 32);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
  Set("RTGEN_TEST_SWITCH_G", "4");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntIn("RTGEN_TEST_SWITCH_G", 1, 4, 2), 4);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
  Set("RTGEN_TEST_SWITCH_G", "5");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntIn("RTGEN_TEST_SWITCH_G", 1, 4, 2), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("RTGEN_TEST_SWITCH_G='5' is not a value it takes; using the default (2; "
                        "it takes 1 to 4)"));
  Set("RTGEN_TEST_SWITCH_H", "8");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntOf("RTGEN_TEST_SWITCH_H", {0, 2, 4, 8, 16}, 0), 8);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
  Set("RTGEN_TEST_SWITCH_H", "6");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntOf("RTGEN_TEST_SWITCH_H", {0, 2, 4, 8, 16}, 0), 0);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("RTGEN_TEST_SWITCH_H='6' is not a value it takes; using the default (0; "
                        "it takes 0, 2, 4, 8, 16)"));
  // Not a number at all: EnvInt's report, once.
  Set("RTGEN_TEST_SWITCH_I", "x");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(EnvIntIn("RTGEN_TEST_SWITCH_I", 1, 4, 3), 3);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("RTGEN_TEST_SWITCH_I='x' is not a value it takes; using the "
                             "default (3)"));
  EXPECT_EQ(err.find("RTGEN_TEST_SWITCH_I"), err.rfind("RTGEN_TEST_SWITCH_I"));
}

}  // namespace
}  // namespace rtgen::kernels
