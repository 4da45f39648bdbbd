#include "client/bench/latency_summary.h"

#include <gtest/gtest.h>

namespace rtgen::bench {
namespace {

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  // n = 5: rank = p / 100 * 4.
  const std::vector<double> sorted = {10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0), 10);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 50), 30);   // rank 2
  EXPECT_DOUBLE_EQ(Percentile(sorted, 90), 46);   // rank 3.6: 40 + 0.6 * 10
  EXPECT_DOUBLE_EQ(Percentile(sorted, 99), 49.6); // rank 3.96
  EXPECT_DOUBLE_EQ(Percentile(sorted, 100), 50);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 25), 20);   // rank 1
  EXPECT_DOUBLE_EQ(Percentile(sorted, 30), 22);   // rank 1.2
}

TEST(PercentileTest, EvenCountMedianIsTheMiddlePairsMean) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(SummarizeTest, SortsAndSummarizes) {
  // 1..100 shuffled: p50 at rank 49.5 -> 50.5, p90 at rank 89.1 -> 90.1, p99 at 98.01 -> 99.01.
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  std::swap(samples[3], samples[70]);
  const LatencySummary s = Summarize(samples);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(s.max, 100);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  const LatencySummary s = Summarize({});
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p99, 0);
}

}  // namespace
}  // namespace rtgen::bench
