#pragma once
// The median the benchmarks report (the mean of the two middle values for an even count; 0 for
// none).

#include <algorithm>
#include <vector>

namespace rtgen::tools {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace rtgen::tools
