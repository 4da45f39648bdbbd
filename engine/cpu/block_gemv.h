#pragma once
// Decode matmul (one token) straight from ggml blocks: y[r] = sum_c W[r][c] x[c], W never
// expanded in memory. Each block of 32 weights is widened to fp32 in registers and multiplied
// in fp32, so the result is the fp32 matmul of the dequantised weights up to summation order:
//   Q8_0: d * sum(q_i x_i)                 Q4_1: d * sum(q_i x_i) + m * sum(x_i)
//   Q4_0: d * sum(q_i x_i) - 8 d * sum(x_i)
// Decode reads every weight once per step, so bytes per weight set its speed (0.56–1.06 bytes
// here against 2 for bf16).

#include <cstdint>

#include "engine/model/model_weights.h"

namespace rtgen {

// Rows [r0, r1) of a matrix of `cols` columns (a multiple of 32) whose row r's blocks start at
// blocks + r * row_bytes. With `accumulate`, y[r] += the product, else y[r] = it.
void BlockGemvRows(BlockFormat format, const uint8_t* blocks, int64_t row_bytes, int64_t cols,
                   int64_t r0, int64_t r1, const float* x, float* y, bool accumulate);

}  // namespace rtgen
