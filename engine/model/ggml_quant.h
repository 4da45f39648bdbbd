#pragma once
// fp32 -> ggml block quantisation (Q8_0, Q4_0, Q4_1), the inverse of ggml_dequant.h.
// Used by the GGUF writer (tests, the synthetic model tool). Round-trip error per element:
//   Q8_0 <= amax/254 (+ fp16 rounding of the scale), Q4_0 <= amax/8 (the clamped top value)
//   and typically amax/16, Q4_1 <= (max - min)/30 (+ fp16 rounding of scale and min),
// where amax/max/min are taken over the element's 32-element block.

#include <cstdint>

namespace rtgen {

// Quantise `n_blocks` * 32 floats from `src` into `dst` (n_blocks * block bytes).
void QuantizeQ8_0(const float* src, int64_t n_blocks, uint8_t* dst);
void QuantizeQ4_0(const float* src, int64_t n_blocks, uint8_t* dst);
void QuantizeQ4_1(const float* src, int64_t n_blocks, uint8_t* dst);

}  // namespace rtgen
