#include "tools/gpu_telemetry.h"

#include <dlfcn.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "tools/median.h"

namespace rtgen::tools {

// The few NVML entry points used, by their documented C signatures (nvmlReturn_t is an int enum,
// 0 = success; nvmlDevice_t an opaque pointer; NVML_CLOCK_SM = 1; power in milliwatts).
struct GpuTelemetry::Api {
  using Init = int (*)();
  using Shutdown = int (*)();
  using ByPciBusId = int (*)(const char*, void**);
  using ClockInfo = int (*)(void*, int, unsigned int*);
  using PowerUsage = int (*)(void*, unsigned int*);
  using Reasons = int (*)(void*, unsigned long long*);
  static constexpr int kClockSm = 1;

  ~Api() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
  // False (s untouched) when a call fails.
  bool Sample(TelemetrySample* s) const {
    unsigned int mhz = 0, mw = 0;
    unsigned long long reasons_mask = 0;
    if (clock_info(device, kClockSm, &mhz) != 0 || power_usage(device, &mw) != 0 ||
        reasons(device, &reasons_mask) != 0) {
      return false;
    }
    s->sm_mhz = mhz;
    s->power_w = mw * 1e-3;
    s->reasons = reasons_mask;
    return true;
  }

  void* lib = nullptr;
  void* device = nullptr;
  Shutdown shutdown = nullptr;
  ClockInfo clock_info = nullptr;
  PowerUsage power_usage = nullptr;
  Reasons reasons = nullptr;
};

TelemetrySummary Summarize(const std::vector<TelemetrySample>& samples) {
  TelemetrySummary s;
  s.samples = samples.size();
  if (samples.empty()) return s;
  std::vector<double> mhz, watts;
  size_t capped = 0, thermal = 0;
  for (const TelemetrySample& x : samples) {
    mhz.push_back(x.sm_mhz);
    watts.push_back(x.power_w);
    capped += (x.reasons & kPowerCapReasons) != 0;
    thermal += (x.reasons & kThermalReasons) != 0;
  }
  s.sm_mhz_median = Median(mhz);
  s.sm_mhz_min = *std::min_element(mhz.begin(), mhz.end());
  s.sm_mhz_max = *std::max_element(mhz.begin(), mhz.end());
  s.power_w_median = Median(watts);
  s.power_capped_fraction = static_cast<double>(capped) / samples.size();
  s.thermal_fraction = static_cast<double>(thermal) / samples.size();
  return s;
}

std::string FormatTelemetry(const TelemetrySummary& s) {
  if (s.samples == 0) return "no samples";
  std::string line = absl::StrFormat(
      "SM %.0f MHz median (%.0f-%.0f), %.0f W, power-capped %.0f%% of %d samples",
      s.sm_mhz_median, s.sm_mhz_min, s.sm_mhz_max, s.power_w_median,
      100.0 * s.power_capped_fraction, static_cast<int>(s.samples));
  if (s.thermal_fraction > 0.0) {
    absl::StrAppend(&line, absl::StrFormat(", thermal %.0f%%", 100.0 * s.thermal_fraction));
  }
  return line;
}

absl::StatusOr<std::unique_ptr<GpuTelemetry>> GpuTelemetry::Open(
    const std::string& pci_bus_id, std::chrono::milliseconds period) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    return absl::UnavailableError("libnvidia-ml.so.1 (the driver's NVML) is not loadable");
  }
  const auto symbol = [&](const char* name) { return dlsym(api->lib, name); };
  const auto init = reinterpret_cast<Api::Init>(symbol("nvmlInit_v2"));
  const auto by_bus = reinterpret_cast<Api::ByPciBusId>(symbol("nvmlDeviceGetHandleByPciBusId_v2"));
  api->clock_info = reinterpret_cast<Api::ClockInfo>(symbol("nvmlDeviceGetClockInfo"));
  api->power_usage = reinterpret_cast<Api::PowerUsage>(symbol("nvmlDeviceGetPowerUsage"));
  api->reasons = reinterpret_cast<Api::Reasons>(symbol("nvmlDeviceGetCurrentClocksEventReasons"));
  if (api->reasons == nullptr) {  // the name before NVML 12
    api->reasons =
        reinterpret_cast<Api::Reasons>(symbol("nvmlDeviceGetCurrentClocksThrottleReasons"));
  }
  if (init == nullptr || by_bus == nullptr || api->clock_info == nullptr ||
      api->power_usage == nullptr || api->reasons == nullptr) {
    return absl::UnavailableError("NVML lacks an entry point the telemetry needs");
  }
  if (const int rc = init(); rc != 0) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed (NVML error ", rc, ")"));
  }
  api->shutdown = reinterpret_cast<Api::Shutdown>(symbol("nvmlShutdown"));
  if (const int rc = by_bus(pci_bus_id.c_str(), &api->device); rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("NVML has no device at PCI bus id ", pci_bus_id, " (error ", rc, ")"));
  }
  return std::unique_ptr<GpuTelemetry>(new GpuTelemetry(std::move(api), period));
}

GpuTelemetry::GpuTelemetry(std::unique_ptr<Api> api, std::chrono::milliseconds period)
    : api_(std::move(api)), period_(period) {}

GpuTelemetry::~GpuTelemetry() { Stop(); }

void GpuTelemetry::Start() {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    samples_.clear();
    running_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

TelemetrySummary GpuTelemetry::Stop() {
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return Summarize(samples_);
}

void GpuTelemetry::Run() {
  const absl::Duration period = absl::FromChrono(period_);
  absl::MutexLock lock(&mu_);
  while (running_) {
    TelemetrySample sample;
    if (api_->Sample(&sample)) samples_.push_back(sample);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](bool* running) { return !*running; }, &running_),
                         period);
  }
}

}  // namespace rtgen::tools
