#pragma once
// Matmul for a few tokens (decode steps) straight from ggml blocks: y[t][r] = sum_c W[r][c]
// x[t][c], W never expanded in memory. Each block of 32 weights is widened to fp32 in registers
// once and applied to every token, in fp32, so the result is the fp32 matmul of the dequantised
// weights up to summation order:
//   Q8_0: d * sum(q_i x_i)                 Q4_1: d * sum(q_i x_i) + m * sum(x_i)
//   Q4_0: d * sum(q_i x_i) - 8 d * sum(x_i)
// Decode reads every weight once per step, so bytes per weight set its speed (0.56–1.06 bytes
// here against 2 for bf16).

#include <cstdint>

#include "engine/model/model_weights.h"

namespace rtgen {

// Token counts above this go through fp32 row blocks instead (engine/cpu/linear.cc): widening
// costs the same per token count, and the fp32 kernels reuse each weight across more tokens.
inline constexpr int64_t kBlockGemvMaxTokens = 8;

// Rows [r0, r1) of a matrix of `cols` columns (a multiple of 32) whose row r's blocks start at
// blocks + r * row_bytes, for num_tokens (1..kBlockGemvMaxTokens) tokens x[t] = x + t * x_stride.
// With `accumulate`, y[t * y_stride + r] += the product, else it is set to it.
void BlockGemvRows(BlockFormat format, const uint8_t* blocks, int64_t row_bytes, int64_t cols,
                   int64_t r0, int64_t r1, const float* x, int64_t x_stride, int64_t num_tokens,
                   float* y, int64_t y_stride, bool accumulate);

}  // namespace rtgen
