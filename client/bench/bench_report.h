#pragma once
// Aggregates request records into the benchmark report: latency summaries (milliseconds),
// throughput, goodput under SLOs and errors by status code.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/bench/latency_summary.h"
#include "client/bench/request_record.h"

namespace rtgen::bench {

// A request is "good" when it succeeded and meets every SLO that is set.
struct SloConfig {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};

// True when `record` succeeded and meets every SLO in `slo` (TPOT is not checked for requests
// that produced fewer than two tokens: it is undefined there).
bool MeetsSlo(const RequestRecord& record, const SloConfig& slo);

struct BenchReport {
  int num_requests = 0;             // measured (warm-up excluded)
  int completed = 0;                // ok()
  int failed = 0;
  int good = 0;                     // completed and within the SLOs
  double duration_s = 0;            // first send -> last end of the measured phase
  long long input_tokens = 0;       // of completed requests
  long long output_tokens = 0;      // of completed requests
  double requests_per_s = 0;        // completed / duration
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;    // (input + output) / duration
  double goodput_requests_per_s = 0;
  LatencySummary ttft_ms;
  LatencySummary tpot_ms;
  LatencySummary itl_ms;
  LatencySummary e2e_ms;
  std::map<std::string, int> errors;  // status name ("UNAVAILABLE", "FINISH_REASON_ERROR") -> count
};

// `duration_s` is the wall time of the measured phase (> 0); latencies of failed requests are
// left out of the summaries.
BenchReport ComputeReport(const std::vector<RequestRecord>& records, double duration_s,
                          const SloConfig& slo);

// Whether a run (or a sweep level) passes: at least one request measured and none failed. A
// run that measured nothing (a --duration that ended before the first request did) measured
// no latency: exit status 1, not a table of zeros and 0.
inline bool RunPassed(const BenchReport& report) {
  return report.num_requests > 0 && report.failed == 0;
}

}  // namespace rtgen::bench
