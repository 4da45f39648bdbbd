// The benchmarks' GPU telemetry: the summary of a run's samples (medians, extremes, the share of
// samples held down for power or heat), its one-line form, and Open's refusal of a device NVML
// does not have (or of a machine without NVML, as the CPU-only CI is).

#include "tools/gpu_telemetry.h"

#include <chrono>

#include "gtest/gtest.h"

namespace rtgen::tools {
namespace {

TEST(GpuTelemetryTest, SummarizesSamples) {
  const std::vector<TelemetrySample> samples = {
      {1980, 660.0, 0x0}, {1800, 695.0, 0x4}, {1665, 699.0, 0x4}, {1890, 691.0, 0x80 | 0x20}};
  const TelemetrySummary s = Summarize(samples);
  EXPECT_EQ(s.samples, 4u);
  EXPECT_DOUBLE_EQ(s.sm_mhz_median, (1800.0 + 1890.0) / 2);
  EXPECT_DOUBLE_EQ(s.sm_mhz_min, 1665.0);
  EXPECT_DOUBLE_EQ(s.sm_mhz_max, 1980.0);
  EXPECT_DOUBLE_EQ(s.power_w_median, (691.0 + 695.0) / 2);
  EXPECT_DOUBLE_EQ(s.power_capped_fraction, 0.75);
  EXPECT_DOUBLE_EQ(s.thermal_fraction, 0.25);
  EXPECT_EQ(FormatTelemetry(s),
            "SM 1845 MHz median (1665-1980), 693 W, power-capped 75% of 4 samples, thermal 25%");
}

TEST(GpuTelemetryTest, IdleReasonIsNeitherPowerNorHeat) {
  const TelemetrySummary s = Summarize({{345, 80.0, 0x1}, {1965, 120.0, 0x0}});
  EXPECT_DOUBLE_EQ(s.power_capped_fraction, 0.0);
  EXPECT_DOUBLE_EQ(s.thermal_fraction, 0.0);
  EXPECT_EQ(FormatTelemetry(s),
            "SM 1155 MHz median (345-1965), 100 W, power-capped 0% of 2 samples");
}

TEST(GpuTelemetryTest, EmptyRunHasNoSamples) {
  const TelemetrySummary s = Summarize({});
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(FormatTelemetry(s), "no samples");
}

TEST(GpuTelemetryTest, RefusesADeviceNvmlDoesNotHave) {
  const auto telemetry = GpuTelemetry::Open("ffff:ff:1f.7", std::chrono::milliseconds(10));
  ASSERT_FALSE(telemetry.ok());
  // Without NVML (no NVIDIA driver) the device lookup is never reached: skipped, not passed.
  if (absl::IsUnavailable(telemetry.status())) {
    GTEST_SKIP() << "NVML is not loadable here: " << telemetry.status();
  }
  EXPECT_TRUE(absl::IsNotFound(telemetry.status())) << telemetry.status();
}

}  // namespace
}  // namespace rtgen::tools
