#pragma once
// RoPE frequencies for the CUDA backend, computed once on the host and uploaded.

#include <vector>

#include "engine/model/model_config.h"

namespace rtgen::kernels {

// inv_freq[i] = theta^(-2i/head_dim) radians per position, i < head_dim / 2, with Llama-3
// frequency scaling applied when the config has it.
std::vector<float> RopeInvFreq(const ModelConfig& config);

}  // namespace rtgen::kernels
