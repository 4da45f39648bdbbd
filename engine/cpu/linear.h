#pragma once
// y = x W^T for a batch of tokens: the CPU backend's matmul. Rows of W are split across the
// pool's threads; within a thread, blocks of W rows stay in cache while every token passes over
// them, several tokens per weight load (so prefill reads each weight far fewer times than once
// per token). Matrices held as ggml blocks are multiplied on the blocks for decode
// (engine/cpu/block_gemv.h) and widened to fp32 a row block at a time for prefill.

#include <cstdint>

#include "engine/cpu/packed_matrix.h"
#include "engine/cpu/thread_pool.h"

namespace rtgen {

// x: [num_tokens][w.cols()] (row stride x_stride), y: [num_tokens][w.rows()] (row stride
// y_stride). With `accumulate`, y += x W^T, else y = x W^T. Accumulation is in fp32.
void Linear(const PackedMatrix& w, const float* x, int64_t x_stride, int64_t num_tokens, float* y,
            int64_t y_stride, bool accumulate, ThreadPool& pool);

}  // namespace rtgen
