#pragma once
// absl flags are spelled with underscores; rtgen's binaries also accept the dashed spelling the
// docs use (--metrics-port, --kv-heads). Rewrites, in place, the name part of every
// "--flag[=value]" argument before "--"; values and positional arguments are left alone.

#include <cstring>

namespace rtgen {

inline void DashedFlagNamesToUnderscores(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) break;  // everything after is positional
    if (std::strncmp(arg, "--", 2) != 0) continue;
    for (char* p = arg + 2; *p != '\0' && *p != '='; ++p) {
      if (*p == '-') *p = '_';
    }
  }
}

}  // namespace rtgen
