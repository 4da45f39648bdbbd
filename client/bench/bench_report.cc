#include "client/bench/bench_report.h"

#include "absl/status/status.h"

namespace rtgen::bench {

namespace {
constexpr double kMsPerS = 1000.0;
}  // namespace

bool MeetsSlo(const RequestRecord& record, const SloConfig& slo) {
  if (!record.ok()) return false;
  if (slo.ttft_ms.has_value() && record.ttft_s * kMsPerS > *slo.ttft_ms) return false;
  if (slo.tpot_ms.has_value() && record.output_tokens > 1 &&
      record.TpotSeconds() * kMsPerS > *slo.tpot_ms) {
    return false;
  }
  return true;
}

BenchReport ComputeReport(const std::vector<RequestRecord>& records, double duration_s,
                          const SloConfig& slo) {
  BenchReport report;
  report.num_requests = static_cast<int>(records.size());
  report.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord& r : records) {
    if (!r.ok()) {
      ++report.failed;
      const std::string name = r.code == absl::StatusCode::kOk
                                   ? "FINISH_REASON_ERROR"
                                   : absl::StatusCodeToString(r.code);
      ++report.errors[name];
      continue;
    }
    ++report.completed;
    if (MeetsSlo(r, slo)) ++report.good;
    report.input_tokens += r.prompt_tokens;
    report.output_tokens += r.output_tokens;
    if (r.output_tokens > 0) ttft.push_back(r.ttft_s * kMsPerS);
    if (r.output_tokens > 1) tpot.push_back(r.TpotSeconds() * kMsPerS);
    for (double gap : r.itl_s) itl.push_back(gap * kMsPerS);
    e2e.push_back(r.e2e_s * kMsPerS);
  }
  if (duration_s > 0) {
    report.requests_per_s = report.completed / duration_s;
    report.output_tokens_per_s = static_cast<double>(report.output_tokens) / duration_s;
    report.total_tokens_per_s =
        static_cast<double>(report.input_tokens + report.output_tokens) / duration_s;
    report.goodput_requests_per_s = report.good / duration_s;
  }
  report.ttft_ms = Summarize(std::move(ttft));
  report.tpot_ms = Summarize(std::move(tpot));
  report.itl_ms = Summarize(std::move(itl));
  report.e2e_ms = Summarize(std::move(e2e));
  return report;
}

}  // namespace rtgen::bench
