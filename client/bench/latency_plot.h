#pragma once
// Draws a sweep's latency against throughput as a PNG with gnuplot (Debian gnuplot-nox).

#include <string>

#include "absl/status/status.h"

namespace rtgen::bench {

// The gnuplot script that reads the sweep CSV at `csv_path` (SweepToCsv's columns) and writes
// `png_path`: output tokens/s on x; TTFT and TPOT p50/p99 (ms, log scale) on y, one point per
// concurrency level, labelled with it.
std::string LatencyPlotScript(const std::string& csv_path, const std::string& png_path);

// Writes the script beside `png_path` (as png_path + ".gp") and runs `gnuplot` on it.
absl::Status DrawLatencyPlot(const std::string& csv_path, const std::string& png_path);

}  // namespace rtgen::bench
