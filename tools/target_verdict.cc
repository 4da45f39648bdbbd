#include "tools/target_verdict.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace rtgen::tools {

TargetVerdict::TargetVerdict(std::string headline, double target_us)
    : headline_(std::move(headline)), target_us_(target_us) {}

void TargetVerdict::Add(const BenchRunRecord& run) {
  if (!run.error) {
    if (run.aggregate && run.aggregate_name != "median") return;
    // A repeated benchmark is judged on its median, never on one of its repetitions.
    if (!run.aggregate && run.repetitions > 1) return;
  }
  kept_.push_back(run);
}

std::string TargetVerdict::Report() const {
  std::string out;
  bool headline_seen = false;
  for (const BenchRunRecord& r : kept_) {
    const bool headline = r.name == headline_;
    headline_seen |= headline;
    const char* note = headline ? "  (headline)" : "";
    if (r.error) {
      absl::StrAppendFormat(&out, "  %-28s ERROR: %s%s\n", r.name, r.error_message, note);
      continue;
    }
    absl::StrAppendFormat(&out, "  %-28s %8.1f us CPU  %8.1f us wall  %s%s\n", r.name, r.cpu_us,
                          r.real_us, r.cpu_us <= target_us_ ? "MEETS" : "MISSES", note);
  }
  if (!headline_seen) {
    absl::StrAppendFormat(&out, "  %s was not run: no verdict\n", headline_);
  }
  return out;
}

bool TargetVerdict::Passes() const {
  for (const BenchRunRecord& r : kept_) {
    if (r.name == headline_ && (r.error || r.cpu_us > target_us_)) return false;
  }
  return true;
}

}  // namespace rtgen::tools
