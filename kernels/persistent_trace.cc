#include "kernels/persistent_trace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/persistent_decode.h"

namespace rtgen {

// Per interval between trace points: the median over layers and blocks of each block's own
// time (SM clock at the device's nominal rate), and the mean over layers of the latest block's
// arrival minus the earliest's start (global timer, coarse).
void PrintPersistentTrace(const uint64_t* device_trace, int layers, int grid) {
  const int points = kernels::kPersistentTracePoints;
  const size_t n = size_t{1} * layers * points * grid;
  std::vector<uint64_t> t(2 * n);
  int khz = 0, device = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess ||
      cudaMemcpy(t.data(), device_trace, t.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
    std::fprintf(stderr, "persistent trace: could not read the stamps\n");
    return;
  }
  auto at = [&](int layer, int point, int block) {
    return static_cast<double>(t[(size_t{1} * layer * points + point) * grid + block]);
  };
  auto clock = [&](int layer, int point, int block) {  // SM cycles
    return static_cast<double>(t[n + (size_t{1} * layer * points + point) * grid + block]);
  };
  static const char* kNames[] = {"Q await+norm", "Q stage wait", "Q gemv",
                                 "Q rope+store", "A await q",    "A attention",
                                 "O await+merge", "O gemv",      "O store",
                                 "G await+norm", "G gemv",       "G silu+store",
                                 "D await",      "D gemv",       "D store",
                                 "-> next Q"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kernels::kPersistentTracePoints);
  std::fprintf(stderr, "persistent trace (last step, %d layers, %d blocks), us:\n", layers, grid);
  for (int i = 0; i < points; ++i) {
    std::vector<double> own;
    double span = 0.0, most = 0.0;
    int spans = 0;
    for (int l = 0; l < layers; ++l) {
      const int nl = i + 1 < points ? l : l + 1;
      if (nl >= layers) continue;
      const int np = (i + 1) % points;
      double lo = 1e300, hi = 0.0, slowest = 0.0;
      for (int b = 0; b < grid; ++b) {
        own.push_back((clock(nl, np, b) - clock(l, i, b)) / khz * 1000.0);
        slowest = std::max(slowest, own.back());
        lo = std::min(lo, at(l, i, b));
        hi = std::max(hi, at(nl, np, b));
      }
      span += (hi - lo) / 1000.0;
      most += slowest;
      ++spans;
    }
    if (own.empty()) continue;
    std::nth_element(own.begin(), own.begin() + own.size() / 2, own.end());
    std::fprintf(stderr,
                 "  %-14s own: median %.2f, slowest %.2f; earliest start to last end %.2f\n",
                 kNames[i], own[own.size() / 2], spans > 0 ? most / spans : 0.0,
                 spans > 0 ? span / spans : 0.0);
  }
  const double whole = (at(layers - 1, points - 1, 0) - at(0, 0, 0)) / 1000.0;
  std::fprintf(stderr, "  block 0, layer 0 start to last layer end: %.1f us\n", whole);
}

}  // namespace rtgen
