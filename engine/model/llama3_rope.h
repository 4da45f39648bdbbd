#pragma once
// Llama-3 frequency-dependent RoPE scaling expressed as per-pair frequency divisors, the form
// llama.cpp's converter stores in the `rope_freqs.weight` GGUF tensor.

#include <vector>

#include "engine/model/model_config.h"

namespace rtgen {

// One factor per rotated pair i in [0, head_dim/2): the RoPE frequency theta^(-2i/head_dim)
// is divided by it. 1 for high frequencies, `factor` for low ones, smooth in between.
std::vector<double> Llama3RopeFreqFactors(const Llama3RopeScaling& s, int head_dim,
                                          double theta);

}  // namespace rtgen
