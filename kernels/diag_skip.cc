#include "kernels/diag_skip.h"

#include <cstdio>
#include <sstream>
#include <string>

#include "kernels/env_switch.h"

namespace rtgen::kernels {
namespace {

constexpr const char* kNames[] = {"attn_norm", "qkv",     "attention", "o",      "ffn_norm",
                                  "gate_up",   "down",    "lm_head",   "upload", "download"};

unsigned ParseSkips() {
  std::stringstream list(EnvValue("RTGEN_DIAG_SKIP"));
  unsigned mask = 0;
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    bool known = false;
    for (unsigned i = 0; i < std::size(kNames); ++i) {
      if (name == kNames[i]) mask |= 1u << i, known = true;
    }
    if (!known) std::fprintf(stderr, "RTGEN_DIAG_SKIP: unknown part '%s' ignored\n", name.c_str());
  }
  if (mask != 0) {
    std::fprintf(stderr, "RTGEN_DIAG_SKIP: every step leaves out %s (its results are garbage)\n",
                 EnvValue("RTGEN_DIAG_SKIP"));
  }
  constexpr unsigned kCopies = 1u << static_cast<unsigned>(StepPart::kUpload) |
                               1u << static_cast<unsigned>(StepPart::kDownload);
  if ((mask & kCopies) != 0) {
    std::fprintf(stderr, "RTGEN_DIAG_SKIP: upload and download leave out only copies made as "
                         "memcpys (RTGEN_STEP_COPIES=memcpy, or a bucket that is not staged)\n");
  }
  return mask;
}

}  // namespace

bool DiagSkips(StepPart part) {
  static const unsigned mask = ParseSkips();
  return (mask >> static_cast<unsigned>(part)) & 1u;
}

}  // namespace rtgen::kernels
