#pragma once
// What the GPU ran at while a benchmark timed it: the SM clock, the board's power draw and the
// reasons the driver gave for holding the clocks below their maximum (a power cap, thermal
// slowdown). A memory-bound step can still be held back by its power: on the H200 the
// Llama-3-8B batch-64 step draws the board's 700 W limit and the driver lowers the SM clock to
// stay under it, so the same code runs at different speeds on chips that need more or less power
// for a clock. The benchmark prints these beside each figure.
//
// NVML is loaded at run time (libnvidia-ml.so.1, part of the driver): nothing links against it,
// and where it or the device is missing the benchmark says so and runs without samples. A thread
// samples every `period` between Start and Stop; a sample whose NVML calls fail is not kept. The
// power reading is the driver's running average (about a second on recent GPUs), so it lags the
// clock and the reasons, which are read as they are.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rtgen::tools {

// NVML's clock-event reason bits that mean "held down for power" (the software power cap, the
// hardware power brake) and "for heat or a hardware signal" (software and hardware thermal
// slowdown, hardware slowdown).
inline constexpr uint64_t kPowerCapReasons = 0x4 | 0x80;
inline constexpr uint64_t kThermalReasons = 0x20 | 0x40 | 0x8;

struct TelemetrySample {
  uint32_t sm_mhz = 0;
  double power_w = 0.0;
  uint64_t reasons = 0;  // NVML clock-event reasons bitmask
};

struct TelemetrySummary {
  size_t samples = 0;
  double sm_mhz_median = 0.0, sm_mhz_min = 0.0, sm_mhz_max = 0.0;
  double power_w_median = 0.0;
  double power_capped_fraction = 0.0;  // samples with a kPowerCapReasons bit set
  double thermal_fraction = 0.0;       // samples with a kThermalReasons bit set
};

TelemetrySummary Summarize(const std::vector<TelemetrySample>& samples);

// One line, e.g. "SM 1815 MHz median (1665-1980), 694 W, power-capped 58% of 42 samples"; says
// "no samples" for an empty summary.
std::string FormatTelemetry(const TelemetrySummary& s);

class GpuTelemetry {
 public:
  // The device whose PCI bus id (cudaDeviceGetPCIBusId's form, e.g. "0000:19:00.0") is given;
  // an error names what is missing (the library, a symbol, the device).
  static absl::StatusOr<std::unique_ptr<GpuTelemetry>> Open(const std::string& pci_bus_id,
                                                           std::chrono::milliseconds period);
  ~GpuTelemetry();
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  // Start and Stop are called from one thread (the benchmark's). Start clears the samples and
  // samples until Stop, which returns the summary of the samples since the last Start (again on
  // a second call).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  TelemetrySummary Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Api;
  GpuTelemetry(std::unique_ptr<Api> api, std::chrono::milliseconds period);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<Api> api_;
  const std::chrono::milliseconds period_;
  std::thread thread_;  // the sampler between Start and Stop
  absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<TelemetrySample> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rtgen::tools
