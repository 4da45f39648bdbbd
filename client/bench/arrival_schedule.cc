#include "client/bench/arrival_schedule.h"

#include <cmath>

namespace rtgen::bench {

PoissonArrivals::PoissonArrivals(double rate_per_s, uint64_t seed)
    : unbounded_(!(rate_per_s > 0) || std::isinf(rate_per_s)),
      rng_(seed),
      gap_(unbounded_ ? 1.0 : rate_per_s) {}

double PoissonArrivals::NextGapSeconds() { return unbounded_ ? 0.0 : gap_(rng_); }

std::vector<double> PoissonArrivals::ArrivalTimes(int n) {
  std::vector<double> times;
  times.reserve(n > 0 ? n : 0);
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += NextGapSeconds();
    times.push_back(t);
  }
  return times;
}

}  // namespace rtgen::bench
