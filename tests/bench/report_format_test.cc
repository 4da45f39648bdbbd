#include "client/bench/report_format.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace rtgen::bench {
namespace {

BenchReport SampleReport(double scale) {
  RequestRecord r;
  r.ttft_s = 0.1 * scale;
  r.e2e_s = 0.5 * scale;
  r.output_tokens = 5;
  r.prompt_tokens = 8;
  r.itl_s = {0.1 * scale, 0.1 * scale, 0.1 * scale, 0.1 * scale};
  RequestRecord failed;
  failed.code = absl::StatusCode::kUnavailable;
  return ComputeReport({r, r, failed}, 2.0, SloConfig{});
}

TEST(ReportFormatTest, JsonHasEveryFieldWithTheComputedValues) {
  const nlohmann::json json = ReportToJson(SampleReport(1));
  for (const char* key :
       {"num_requests", "completed", "failed", "good", "duration_s", "input_tokens",
        "output_tokens", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s",
        "goodput_requests_per_s", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "errors"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["completed"], 2);
  EXPECT_EQ(json["errors"]["UNAVAILABLE"], 1);
  EXPECT_DOUBLE_EQ(json["output_tokens_per_s"].get<double>(), 5.0);
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    for (const char* stat : {"count", "mean", "p50", "p90", "p99", "max"}) {
      EXPECT_TRUE(json[metric].contains(stat)) << metric << "." << stat;
    }
  }
  EXPECT_NEAR(json["ttft_ms"]["p99"].get<double>(), 100, 1e-9);
  EXPECT_NEAR(json["tpot_ms"]["mean"].get<double>(), 100, 1e-9);
}

TEST(ReportFormatTest, SweepJsonIsAnArrayWithConcurrency) {
  const nlohmann::json json = SweepToJson({{1, SampleReport(1)}, {4, SampleReport(2)}});
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["concurrency"], 1);
  EXPECT_EQ(json[1]["concurrency"], 4);
  EXPECT_NEAR(json[1]["e2e_ms"]["p50"].get<double>(), 1000, 1e-9);
}

TEST(ReportFormatTest, CsvHasAHeaderAndOneRowPerLevelOfEqualWidth) {
  const std::string csv = SweepToCsv({{1, SampleReport(1)}, {8, SampleReport(3)}});
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  EXPECT_EQ(header, SweepCsvColumns());
  EXPECT_EQ(header[0], "concurrency");
  for (int i = 1; i < 3; ++i) {
    const std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(cells.size(), header.size()) << lines[i];
  }
  EXPECT_EQ(lines[2].substr(0, 2), "8,");
  // ttft_p50_ms of the second row: 0.1 s * 3.
  size_t column = 0;
  while (header[column] != "ttft_p50_ms") ++column;
  const std::vector<std::string> row = absl::StrSplit(lines[2], ',');
  EXPECT_EQ(row[column], "300.000");
}

TEST(ReportFormatTest, TablesNameTheMetrics) {
  const std::string table = FormatReportTable(SampleReport(1));
  for (const char* word : {"TTFT", "TPOT", "ITL", "E2E", "goodput", "UNAVAILABLE=1"}) {
    EXPECT_NE(table.find(word), std::string::npos) << word << "\n" << table;
  }
  const std::string sweep = FormatSweepTable({{2, SampleReport(1)}});
  EXPECT_NE(sweep.find("ttft p50"), std::string::npos);
}

}  // namespace
}  // namespace rtgen::bench
