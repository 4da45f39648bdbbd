#include "kernels/alloc_log.h"

#include <cinttypes>
#include <cstdio>

#include "kernels/env_switch.h"

namespace rtgen::kernels {

std::string FormatAllocation(const char* kind, size_t bytes, const void* ptr) {
  constexpr uint64_t kLargePage = uint64_t{2} << 20;
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  char line[160];
  std::snprintf(line, sizeof(line),
                "alloc %s %zu B at 0x%" PRIxPTR " (2 MiB page %" PRIu64 ", offset %" PRIu64 ")",
                kind, bytes, address, static_cast<uint64_t>(address / kLargePage),
                static_cast<uint64_t>(address % kLargePage));
  return line;
}

void LogAllocation(const char* kind, size_t bytes, const void* ptr) {
  static const bool on = EnvOptIn("RTGEN_DIAG_ALLOC_LOG");
  if (on) std::fprintf(stderr, "%s\n", FormatAllocation(kind, bytes, ptr).c_str());
}

}  // namespace rtgen::kernels
