#include "client/bench/report_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rtgen::bench {

namespace {

nlohmann::json SummaryToJson(const LatencySummary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50},
          {"p90", s.p90},     {"p99", s.p99},   {"max", s.max}};
}

std::string SummaryLine(const char* name, const LatencySummary& s) {
  return absl::StrFormat("%-22s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, s.mean, s.p50, s.p90,
                         s.p99, s.max);
}

}  // namespace

nlohmann::json ReportToJson(const BenchReport& report) {
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [name, count] : report.errors) errors[name] = count;
  return {{"num_requests", report.num_requests},
          {"completed", report.completed},
          {"failed", report.failed},
          {"good", report.good},
          {"duration_s", report.duration_s},
          {"input_tokens", report.input_tokens},
          {"output_tokens", report.output_tokens},
          {"requests_per_s", report.requests_per_s},
          {"output_tokens_per_s", report.output_tokens_per_s},
          {"total_tokens_per_s", report.total_tokens_per_s},
          {"goodput_requests_per_s", report.goodput_requests_per_s},
          {"ttft_ms", SummaryToJson(report.ttft_ms)},
          {"tpot_ms", SummaryToJson(report.tpot_ms)},
          {"itl_ms", SummaryToJson(report.itl_ms)},
          {"e2e_ms", SummaryToJson(report.e2e_ms)},
          {"errors", errors}};
}

nlohmann::json SweepToJson(const std::vector<SweepRow>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const SweepRow& row : rows) {
    nlohmann::json object = ReportToJson(row.report);
    object["concurrency"] = row.concurrency;
    array.push_back(std::move(object));
  }
  return array;
}

std::vector<std::string> SweepCsvColumns() {
  std::vector<std::string> columns = {"concurrency",         "num_requests",
                                      "completed",           "failed",
                                      "duration_s",          "requests_per_s",
                                      "output_tokens_per_s", "goodput_requests_per_s"};
  for (const char* metric : {"ttft", "tpot", "itl", "e2e"}) {
    for (const char* stat : {"mean", "p50", "p90", "p99"}) {
      columns.push_back(absl::StrCat(metric, "_", stat, "_ms"));
    }
  }
  return columns;
}

std::string SweepToCsv(const std::vector<SweepRow>& rows) {
  std::string csv = absl::StrCat(absl::StrJoin(SweepCsvColumns(), ","), "\n");
  for (const SweepRow& row : rows) {
    const BenchReport& r = row.report;
    std::vector<std::string> cells = {
        absl::StrCat(row.concurrency),           absl::StrCat(r.num_requests),
        absl::StrCat(r.completed),               absl::StrCat(r.failed),
        absl::StrFormat("%.3f", r.duration_s),   absl::StrFormat("%.3f", r.requests_per_s),
        absl::StrFormat("%.2f", r.output_tokens_per_s),
        absl::StrFormat("%.3f", r.goodput_requests_per_s)};
    for (const LatencySummary* s : {&r.ttft_ms, &r.tpot_ms, &r.itl_ms, &r.e2e_ms}) {
      for (double v : {s->mean, s->p50, s->p90, s->p99}) cells.push_back(absl::StrFormat("%.3f", v));
    }
    absl::StrAppend(&csv, absl::StrJoin(cells, ","), "\n");
  }
  return csv;
}

std::string FormatReportTable(const BenchReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "%-28s %d (%d completed, %d failed)\n", "requests", r.num_requests,
                        r.completed, r.failed);
  absl::StrAppendFormat(&out, "%-28s %.3f\n", "duration (s)", r.duration_s);
  absl::StrAppendFormat(&out, "%-28s %lld / %lld\n", "input / output tokens", r.input_tokens,
                        r.output_tokens);
  absl::StrAppendFormat(&out, "%-28s %.3f\n", "requests/s", r.requests_per_s);
  absl::StrAppendFormat(&out, "%-28s %.2f\n", "output tokens/s", r.output_tokens_per_s);
  absl::StrAppendFormat(&out, "%-28s %.2f\n", "total tokens/s", r.total_tokens_per_s);
  absl::StrAppendFormat(&out, "%-28s %.3f (%d requests within SLO)\n", "goodput (requests/s)",
                        r.goodput_requests_per_s, r.good);
  absl::StrAppendFormat(&out, "%-22s %10s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50",
                        "p90", "p99", "max");
  absl::StrAppend(&out, SummaryLine("TTFT", r.ttft_ms), SummaryLine("TPOT", r.tpot_ms),
                  SummaryLine("ITL", r.itl_ms), SummaryLine("E2E", r.e2e_ms));
  if (r.errors.empty()) {
    absl::StrAppend(&out, "errors: none\n");
  } else {
    absl::StrAppend(&out, "errors:");
    for (const auto& [name, count] : r.errors) absl::StrAppendFormat(&out, " %s=%d", name, count);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string FormatSweepTable(const std::vector<SweepRow>& rows) {
  std::string out = absl::StrFormat(
      "%5s %6s %5s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "conc", "reqs", "errs", "req/s",
      "out tok/s", "goodput", "ttft p50", "ttft p99", "tpot p50", "tpot p99", "itl p99",
      "e2e p99");
  for (const SweepRow& row : rows) {
    const BenchReport& r = row.report;
    absl::StrAppendFormat(&out, "%5d %6d %5d %8.2f %9.1f %9.2f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
                          row.concurrency, r.num_requests, r.failed, r.requests_per_s,
                          r.output_tokens_per_s, r.goodput_requests_per_s, r.ttft_ms.p50,
                          r.ttft_ms.p99, r.tpot_ms.p50, r.tpot_ms.p99, r.itl_ms.p99, r.e2e_ms.p99);
  }
  absl::StrAppend(&out, "(latencies in ms; goodput in requests/s within the SLOs)\n");
  return out;
}

}  // namespace rtgen::bench
