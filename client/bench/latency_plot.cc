#include "client/bench/latency_plot.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace rtgen::bench {

namespace {

// A gnuplot single-quoted string: a quote is doubled.
std::string Quote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

// A POSIX shell single-quoted word.
std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

}  // namespace

std::string LatencyPlotScript(const std::string& csv_path, const std::string& png_path) {
  const std::string csv = Quote(csv_path);
  return absl::StrCat(
      "set terminal pngcairo size 1000,650 noenhanced\n",
      "set output ", Quote(png_path), "\n",
      "set datafile separator ','\n",
      "set key autotitle columnhead\n",
      "set title 'rtgen-bench: latency vs throughput (labels: concurrency)'\n",
      "set xlabel 'output tokens/s'\n",
      "set ylabel 'latency (ms)'\n",
      "set logscale y\n",
      "set grid\n",
      "set key left top\n",
      "plot ", csv, " using 'output_tokens_per_s':'ttft_p50_ms' with linespoints title 'TTFT p50', \\\n",
      "     ", csv, " using 'output_tokens_per_s':'ttft_p99_ms' with linespoints title 'TTFT p99', \\\n",
      "     ", csv, " using 'output_tokens_per_s':'tpot_p50_ms' with linespoints title 'TPOT p50', \\\n",
      "     ", csv, " using 'output_tokens_per_s':'tpot_p99_ms' with linespoints title 'TPOT p99', \\\n",
      "     ", csv,
      " using 'output_tokens_per_s':'tpot_p50_ms':(sprintf('%d', column('concurrency'))) "
      "with labels offset 0,1 notitle\n");
}

absl::Status DrawLatencyPlot(const std::string& csv_path, const std::string& png_path) {
  const std::string script_path = png_path + ".gp";
  {
    std::ofstream out(script_path);
    out << LatencyPlotScript(csv_path, png_path);
    if (!out) return absl::InternalError(absl::StrCat("--plot: cannot write ", script_path));
  }
  const std::string command = absl::StrCat("gnuplot ", ShellQuote(script_path));
  const int rc = std::system(command.c_str());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(
        "--plot: `", command, "` failed (status ", rc,
        "); install gnuplot (Debian: gnuplot-nox) or drop --plot"));
  }
  return absl::OkStatus();
}

}  // namespace rtgen::bench
