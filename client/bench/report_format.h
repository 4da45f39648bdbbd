#pragma once
// The benchmark report as a table (stdout), JSON (--output) and CSV (sweep rows).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/bench/bench_report.h"

namespace rtgen::bench {

// One sweep level: the concurrency it ran at and what it measured.
struct SweepRow {
  int concurrency = 0;
  BenchReport report;
};

// {"num_requests", "completed", "failed", "good", "duration_s", "input_tokens",
//  "output_tokens", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s",
//  "goodput_requests_per_s", "ttft_ms": {count, mean, p50, p90, p99, max}, "tpot_ms",
//  "itl_ms", "e2e_ms", "errors": {status name: count}}.
nlohmann::json ReportToJson(const BenchReport& report);
// A JSON array of ReportToJson objects, each with "concurrency" added.
nlohmann::json SweepToJson(const std::vector<SweepRow>& rows);
// A header line then one line per row; every latency column is in milliseconds.
std::string SweepToCsv(const std::vector<SweepRow>& rows);
// The CSV's header, for readers (gnuplot) that address columns by name.
std::vector<std::string> SweepCsvColumns();

// A human-readable multi-line table of one report.
std::string FormatReportTable(const BenchReport& report);
// One line per sweep level.
std::string FormatSweepTable(const std::vector<SweepRow>& rows);

}  // namespace rtgen::bench
