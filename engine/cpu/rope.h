#pragma once
// Rotary position embedding, Hugging Face "rotate half" convention: within a head, dimension i
// pairs with i + head_dim/2 and both rotate by angle position * inv_freq[i].

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/rope_inv_freq.h"  // ComputeRopeInvFreq: the inv_freq these functions take

namespace rtgen {

// Fills cos_sin[0, half) with cos and cos_sin[half, 2*half) with sin of position * inv_freq.
void RopeCosSin(const std::vector<float>& inv_freq, int32_t position, float* cos_sin);

// Rotates `num_heads` consecutive heads of `head_dim` floats in place.
void ApplyRope(float* x, int num_heads, int head_dim, const float* cos_sin);

}  // namespace rtgen
