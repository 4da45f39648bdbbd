// The verdict of a Google Benchmark run against a per-step CPU-time target: which runs decide
// (the median of repetitions, else the single run), and an error in the headline benchmark fails
// it. Kept apart from the benchmark library so the rules are tested on plain records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rtgen::tools {

// One reported run, in microseconds per step.
struct BenchRunRecord {
  std::string name;            // the benchmark function's name
  bool aggregate = false;      // a statistic over repetitions (mean, median, stddev, ...)
  std::string aggregate_name;  // "median" etc. when `aggregate`
  int64_t repetitions = 1;     // repetitions of the benchmark this run belongs to
  bool error = false;          // the benchmark called SkipWithError
  std::string error_message;
  double cpu_us = 0;
  double real_us = 0;
};

class TargetVerdict {
 public:
  // `headline`: the benchmark whose result decides the verdict; `target_us`: its CPU-time limit.
  TargetVerdict(std::string headline, double target_us);

  // Keeps `run` when it decides: an error, the median of repeated runs, or the run of a benchmark
  // run once. Single repetitions of a repeated benchmark and other statistics are dropped.
  void Add(const BenchRunRecord& run);

  // One line per kept run against the target, and the verdict's reason where it fails.
  std::string Report() const;

  // False when the headline benchmark erred or misses the target. A headline that was not run
  // (filtered out) gives no verdict and passes; Report() says so.
  bool Passes() const;

 private:
  std::string headline_;
  double target_us_;
  std::vector<BenchRunRecord> kept_;
};

}  // namespace rtgen::tools
