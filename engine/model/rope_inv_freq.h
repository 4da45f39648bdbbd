#pragma once
// RoPE frequencies of a model, one definition for every backend (the CPU backend computes its
// angles from them; the CUDA backend uploads them), so both rotate by the same floats.

#include <vector>

#include "engine/model/model_config.h"

namespace rtgen {

// inv_freq[i] = theta^(-2i/head_dim) radians per position for i < head_dim/2, rounded to float,
// then, when config.rope_scaling is set, the Llama-3 frequency-dependent rescaling of those floats
// (as Hugging Face's _compute_llama3_parameters).
std::vector<float> ComputeRopeInvFreq(const ModelConfig& config);

}  // namespace rtgen
