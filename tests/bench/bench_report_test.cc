#include "client/bench/bench_report.h"

#include <gtest/gtest.h>

namespace rtgen::bench {
namespace {

RequestRecord Ok(double ttft_s, double e2e_s, int tokens, int prompt_tokens = 10) {
  RequestRecord r;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = tokens;
  r.prompt_tokens = prompt_tokens;
  for (int i = 1; i < tokens; ++i) r.itl_s.push_back((e2e_s - ttft_s) / (tokens - 1));
  return r;
}

TEST(BenchReportTest, TpotIsDecodeTimeOverTokensAfterTheFirst) {
  EXPECT_DOUBLE_EQ(Ok(0.1, 1.1, 11).TpotSeconds(), 0.1);
  EXPECT_DOUBLE_EQ(Ok(0.1, 0.1, 1).TpotSeconds(), 0);
}

TEST(BenchReportTest, GoodputCountsRequestsWithinBothSlos) {
  SloConfig slo;
  slo.ttft_ms = 200;
  slo.tpot_ms = 50;
  std::vector<RequestRecord> records = {
      Ok(0.100, 0.100 + 9 * 0.040, 10),  // good: 100 ms, 40 ms
      Ok(0.300, 0.300 + 9 * 0.040, 10),  // TTFT too slow
      Ok(0.150, 0.150 + 9 * 0.060, 10),  // TPOT too slow
      Ok(0.200, 0.200 + 9 * 0.050, 10),  // good: exactly at both limits
      Ok(0.050, 0.050, 1),               // good: one token, TPOT undefined
  };
  RequestRecord failed;
  failed.code = absl::StatusCode::kUnavailable;
  records.push_back(failed);
  const BenchReport report = ComputeReport(records, /*duration_s=*/2.0, slo);
  EXPECT_EQ(report.num_requests, 6);
  EXPECT_EQ(report.completed, 5);
  EXPECT_EQ(report.failed, 1);
  EXPECT_EQ(report.good, 3);
  EXPECT_DOUBLE_EQ(report.goodput_requests_per_s, 1.5);
  EXPECT_DOUBLE_EQ(report.requests_per_s, 2.5);
  EXPECT_EQ(report.output_tokens, 41);
  EXPECT_EQ(report.input_tokens, 50);
  EXPECT_DOUBLE_EQ(report.output_tokens_per_s, 20.5);
  EXPECT_DOUBLE_EQ(report.total_tokens_per_s, 45.5);
}

TEST(BenchReportTest, NoSloMeansEverySuccessIsGood) {
  const BenchReport report = ComputeReport({Ok(5, 10, 3), Ok(1, 2, 2)}, 4.0, SloConfig{});
  EXPECT_EQ(report.good, 2);
  EXPECT_DOUBLE_EQ(report.goodput_requests_per_s, 0.5);
}

TEST(BenchReportTest, LatencySummariesAreMillisecondsOfSuccessesOnly) {
  RequestRecord slow_failure = Ok(9, 9, 2);
  slow_failure.code = absl::StatusCode::kDeadlineExceeded;
  const BenchReport report =
      ComputeReport({Ok(0.1, 0.5, 5), Ok(0.3, 0.7, 5), slow_failure}, 1.0, SloConfig{});
  EXPECT_EQ(report.ttft_ms.count, 2);
  EXPECT_NEAR(report.ttft_ms.mean, 200, 1e-9);
  EXPECT_NEAR(report.ttft_ms.p50, 200, 1e-9);
  EXPECT_NEAR(report.tpot_ms.mean, 100, 1e-9);  // (0.5 - 0.1) / 4 and (0.7 - 0.3) / 4
  EXPECT_EQ(report.itl_ms.count, 8);
  EXPECT_NEAR(report.e2e_ms.p99, 500 + 0.99 * 200, 1e-9);
}

TEST(BenchReportTest, ErrorsAreCountedByStatusName) {
  RequestRecord exhausted;
  exhausted.code = absl::StatusCode::kResourceExhausted;
  RequestRecord finish_error = Ok(0.1, 0.2, 2);
  finish_error.finish_error = true;
  const BenchReport report =
      ComputeReport({exhausted, exhausted, finish_error, Ok(0.1, 0.2, 2)}, 1.0, SloConfig{});
  EXPECT_EQ(report.failed, 3);
  ASSERT_EQ(report.errors.size(), 2u);
  EXPECT_EQ(report.errors.at("RESOURCE_EXHAUSTED"), 2);
  EXPECT_EQ(report.errors.at("FINISH_REASON_ERROR"), 1);
}

TEST(BenchReportTest, ARunPassesOnlyWithRequestsMeasuredAndNoneFailed) {
  BenchReport report;
  EXPECT_FALSE(RunPassed(report));  // nothing measured: not a pass (it exited 0)
  report.num_requests = 3;
  report.completed = 3;
  EXPECT_TRUE(RunPassed(report));
  report.failed = 1;
  EXPECT_FALSE(RunPassed(report));
}

}  // namespace
}  // namespace rtgen::bench
