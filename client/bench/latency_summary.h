#pragma once
// Percentiles and summaries of latency samples (seconds in, whatever unit the caller keeps).

#include <vector>

namespace rtgen::bench {

// p in [0, 100] of `sorted` (ascending, non-empty), linearly interpolated between the two
// closest ranks: rank = p / 100 * (n - 1) (numpy's default "linear" method).
double Percentile(const std::vector<double>& sorted, double p);

// Mean and the percentiles the report shows. All zero (count 0) for no samples.
struct LatencySummary {
  int count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Summarizes `samples` in any order.
LatencySummary Summarize(std::vector<double> samples);

}  // namespace rtgen::bench
