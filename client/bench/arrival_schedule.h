#pragma once
// Open-loop arrival times: a Poisson process at a fixed request rate.

#include <cstdint>
#include <random>
#include <vector>

namespace rtgen::bench {

// Draws exponential inter-arrival gaps with mean 1 / rate seconds, so arrivals form a Poisson
// process of `rate` requests per second. A rate of +inf (or <= 0, meaning "as fast as
// possible") gives gaps of 0. Deterministic for a given seed.
class PoissonArrivals {
 public:
  PoissonArrivals(double rate_per_s, uint64_t seed);

  // The gap before the next arrival, seconds.
  double NextGapSeconds();
  // The first `n` arrival times, seconds from the start (the first arrival is after one gap).
  std::vector<double> ArrivalTimes(int n);

 private:
  bool unbounded_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
};

}  // namespace rtgen::bench
