#include "tools/target_verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rtgen::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHeadline[] = "BM_Step";

BenchRunRecord Single(const char* name, double cpu_us, int64_t repetitions = 1) {
  BenchRunRecord r;
  r.name = name;
  r.repetitions = repetitions;
  r.cpu_us = cpu_us;
  r.real_us = cpu_us;
  return r;
}

BenchRunRecord Statistic(const char* name, const char* statistic, double cpu_us) {
  BenchRunRecord r = Single(name, cpu_us, 5);
  r.aggregate = true;
  r.aggregate_name = statistic;
  return r;
}

TEST(TargetVerdictTest, OneRunIsJudgedAgainstTheTarget) {
  TargetVerdict meets(kHeadline, 50.0);
  meets.Add(Single(kHeadline, 49.0));
  EXPECT_TRUE(meets.Passes());
  EXPECT_THAT(meets.Report(), HasSubstr("MEETS"));

  TargetVerdict misses(kHeadline, 50.0);
  misses.Add(Single(kHeadline, 51.0));
  EXPECT_FALSE(misses.Passes());
  EXPECT_THAT(misses.Report(), HasSubstr("MISSES"));
}

// With --benchmark_repetitions the median decides: one slow repetition does not fail a run whose
// median meets the target, and a fast one does not pass a run whose median misses it.
TEST(TargetVerdictTest, RepetitionsAreJudgedOnTheirMedian) {
  TargetVerdict noisy(kHeadline, 50.0);
  for (double us : {40.0, 41.0, 90.0, 42.0, 40.0}) noisy.Add(Single(kHeadline, us, 5));
  noisy.Add(Statistic(kHeadline, "mean", 50.6));
  noisy.Add(Statistic(kHeadline, "median", 41.0));
  noisy.Add(Statistic(kHeadline, "stddev", 21.7));
  EXPECT_TRUE(noisy.Passes()) << noisy.Report();
  EXPECT_THAT(noisy.Report(), Not(HasSubstr("MISSES")));

  TargetVerdict slow(kHeadline, 50.0);
  for (double us : {10.0, 60.0, 61.0}) slow.Add(Single(kHeadline, us, 3));
  slow.Add(Statistic(kHeadline, "median", 60.0));
  EXPECT_FALSE(slow.Passes()) << slow.Report();
}

TEST(TargetVerdictTest, AnErrorInTheHeadlineFails) {
  TargetVerdict verdict(kHeadline, 50.0);
  BenchRunRecord failed = Single(kHeadline, 0.0);
  failed.error = true;
  failed.error_message = "not a full decode batch";
  verdict.Add(failed);
  EXPECT_FALSE(verdict.Passes());
  EXPECT_THAT(verdict.Report(), HasSubstr("ERROR: not a full decode batch"));
}

TEST(TargetVerdictTest, OtherBenchmarksAreReportedButDoNotDecide) {
  TargetVerdict verdict(kHeadline, 50.0);
  verdict.Add(Single(kHeadline, 30.0));
  verdict.Add(Single("BM_Other", 80.0));
  BenchRunRecord failed = Single("BM_Broken", 0.0);
  failed.error = true;
  failed.error_message = "boom";
  verdict.Add(failed);
  EXPECT_TRUE(verdict.Passes());
  EXPECT_THAT(verdict.Report(), HasSubstr("BM_Other"));
  EXPECT_THAT(verdict.Report(), HasSubstr("ERROR: boom"));
}

TEST(TargetVerdictTest, AHeadlineFilteredOutGivesNoVerdict) {
  TargetVerdict verdict(kHeadline, 50.0);
  verdict.Add(Single("BM_Other", 80.0));
  EXPECT_TRUE(verdict.Passes());
  EXPECT_THAT(verdict.Report(), HasSubstr("BM_Step was not run: no verdict"));
}

}  // namespace
}  // namespace rtgen::tools
