#pragma once
// RoPE frequencies for the CUDA backend, computed once on the host and uploaded: the model's
// (engine/model/rope_inv_freq.h), the same floats the CPU backend rotates by.

#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/rope_inv_freq.h"

namespace rtgen::kernels {

// inv_freq[i], i < head_dim / 2, radians per position (Llama-3 scaling applied where the config
// has it).
inline std::vector<float> RopeInvFreq(const ModelConfig& config) {
  return ComputeRopeInvFreq(config);
}

}  // namespace rtgen::kernels
