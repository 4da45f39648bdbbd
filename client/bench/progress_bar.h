#pragma once
// A one-line progress bar on stderr, redrawn at most ten times a second. Thread-safe.

#include <chrono>
#include <mutex>
#include <string>

namespace rtgen::bench {

class ProgressBar {
 public:
  // `label` prefixes the line. Progress is done / total when total > 0, else elapsed /
  // duration_s. Draws nothing when `enabled` is false.
  ProgressBar(std::string label, int total, double duration_s, bool enabled);

  // One request finished (failed: with an error).
  void Add(bool failed);
  // Draws the final state and ends the line.
  void Finish();

 private:
  void Draw(bool force);

  std::string label_;
  int total_;
  double duration_s_;
  bool enabled_;
  int done_ = 0;
  int failed_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::mutex mu_;
};

}  // namespace rtgen::bench
