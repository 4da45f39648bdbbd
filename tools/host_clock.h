#pragma once
// The benchmarks' host wall clock: seconds on the steady clock.

#include <chrono>

namespace rtgen::tools {

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace rtgen::tools
