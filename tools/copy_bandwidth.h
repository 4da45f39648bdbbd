#pragma once
// The GPU benchmarks' floor: device-to-device copy bandwidth in bytes/s (read + written),
// median of 10 timed copies of 1 GiB of random (non-zero) data after 2 warm-up copies.

#include "absl/status/statusor.h"

namespace rtgen::tools {

absl::StatusOr<double> MeasureCopyBandwidth();

}  // namespace rtgen::tools
