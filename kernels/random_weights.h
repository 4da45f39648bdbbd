#pragma once
// Weights at a model's real shapes, drawn on the device from a seed: no host copy of any tensor
// (Llama-3-8B is 16 GB in bf16). For benchmarks of speed, not of quality: matrices and the
// embedding ~ normal(0, 0.02), norm weights ~ normal(1, 0.1); never exactly zero.

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kernels/cuda_backend.h"
#include "kernels/device_weights.h"

namespace rtgen {

// Allocates and fills every tensor of `config` on the current device (untied configs get an
// lm_head of their own). The same (config, seed) gives the same values on any device.
absl::StatusOr<DeviceWeights> CreateRandomDeviceWeights(const ModelConfig& config,
                                                        uint64_t seed);

// A CudaBackend on options.device with CreateRandomDeviceWeights(config, seed).
absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithRandomWeights(
    const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options);

}  // namespace rtgen
