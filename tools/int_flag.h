#pragma once
// The benchmarks' integer flags (rtgen-cpu-bench, the device micro-benchmarks): a whole decimal
// number in [lo, hi], or an error that names the flag and the text (std::atoi read "abc" as 0
// and "200x" as 200). Plain C++17, so the .cu tools include it too.

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace rtgen::tools {

// True with *out set when `text` is a whole integer in [lo, hi]; otherwise prints
// "FLAG must be an integer in [lo, hi] (got 'text')" to stderr and returns false.
inline bool ParseIntFlag(const char* flag, const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    std::fprintf(stderr, "%s must be an integer in [%ld, %ld] (got '%s')\n", flag, lo, hi, text);
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

}  // namespace rtgen::tools
