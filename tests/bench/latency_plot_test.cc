#include "client/bench/latency_plot.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "client/bench/bench_report.h"
#include "client/bench/report_format.h"
#include "tests/unique_temp_path.h"

namespace rtgen::bench {
namespace {

TEST(LatencyPlotTest, ScriptReadsTheCsvColumnsAndWritesThePng) {
  const std::string script = LatencyPlotScript("/tmp/a b.csv", "/tmp/it's.png");
  EXPECT_NE(script.find("set output '/tmp/it''s.png'"), std::string::npos) << script;
  EXPECT_NE(script.find("'/tmp/a b.csv'"), std::string::npos);
  for (const std::string column : {"output_tokens_per_s", "ttft_p99_ms", "tpot_p50_ms"}) {
    bool in_csv = false;
    for (const std::string& c : SweepCsvColumns()) in_csv = in_csv || c == column;
    EXPECT_TRUE(in_csv) << column;
    EXPECT_NE(script.find("'" + column + "'"), std::string::npos) << column;
  }
}

// Needs gnuplot (Debian gnuplot-nox, one of scripts/lib/deps.sh's test packages).
TEST(LatencyPlotTest, GnuplotDrawsAPngFromASweepCsv) {
  std::vector<SweepRow> rows;
  for (int level : {1, 2, 4}) {
    RequestRecord r;
    r.ttft_s = 0.05 * level;
    r.e2e_s = 0.05 * level + 0.02 * 9;
    r.output_tokens = 10;
    rows.push_back({level, ComputeReport({r, r}, 1.0 / level, SloConfig{})});
  }
  const std::filesystem::path dir = std::filesystem::path(testing::UniqueTempPath("plot"));
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "sweep.csv").string();
  const std::string png = (dir / "sweep.png").string();
  std::filesystem::remove(png);
  std::ofstream(csv) << SweepToCsv(rows);
  const absl::Status status = DrawLatencyPlot(csv, png);
  ASSERT_TRUE(status.ok()) << status;
  std::ifstream in(png, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
}

}  // namespace
}  // namespace rtgen::bench
