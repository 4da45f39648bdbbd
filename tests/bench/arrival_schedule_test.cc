#include "client/bench/arrival_schedule.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace rtgen::bench {
namespace {

TEST(PoissonArrivalsTest, InterArrivalMeanAndSpreadMatchTheRate) {
  constexpr double kRate = 8.0;  // per second: mean gap 0.125 s
  constexpr int kN = 200000;
  PoissonArrivals arrivals(kRate, /*seed=*/42);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const double gap = arrivals.NextGapSeconds();
    ASSERT_GE(gap, 0);
    sum += gap;
    sum_sq += gap * gap;
  }
  const double mean = sum / kN;
  const double variance = sum_sq / kN - mean * mean;
  // Exponential: mean = stddev = 1 / rate. The standard error of the mean is 0.125 / sqrt(2e5).
  EXPECT_NEAR(mean, 1 / kRate, 0.002);
  EXPECT_NEAR(std::sqrt(variance), 1 / kRate, 0.003);
}

TEST(PoissonArrivalsTest, ArrivalTimesIncreaseAndCountMatchesRate) {
  PoissonArrivals arrivals(50.0, 7);
  const std::vector<double> times = arrivals.ArrivalTimes(5000);
  ASSERT_EQ(times.size(), 5000u);
  for (size_t i = 1; i < times.size(); ++i) ASSERT_GE(times[i], times[i - 1]);
  // 5000 arrivals at 50/s take about 100 s (sd of the sum: sqrt(5000) / 50 = 1.4 s).
  EXPECT_NEAR(times.back(), 100.0, 6.0);
}

TEST(PoissonArrivalsTest, SameSeedSameSchedule) {
  PoissonArrivals a(3.0, 99), b(3.0, 99), c(3.0, 100);
  const std::vector<double> ta = a.ArrivalTimes(10);
  EXPECT_EQ(ta, b.ArrivalTimes(10));
  EXPECT_NE(ta, c.ArrivalTimes(10));
}

TEST(PoissonArrivalsTest, InfiniteRateSendsAllAtOnce) {
  PoissonArrivals arrivals(std::numeric_limits<double>::infinity(), 1);
  EXPECT_EQ(arrivals.ArrivalTimes(4), (std::vector<double>{0, 0, 0, 0}));  // four, all at 0
}

}  // namespace
}  // namespace rtgen::bench
