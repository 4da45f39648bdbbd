#pragma once
// Causal attention over a paged KV cache, one layer, for every token of a step.

#include <cstdint>

#include "engine/backend.h"
#include "engine/cpu/thread_pool.h"

namespace rtgen {

// Layout of one layer's cache: [num_blocks][block_size][num_kv_heads][head_dim] fp32.
struct PagedKvLayout {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t slot_stride() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }
};

// Writes k/v rows ([num_tokens][num_kv_heads * head_dim]) at input.slot_mapping (slot -1 and
// out-of-pool slots are skipped).
void WriteKv(const StepInput& input, const float* k, const float* v, const PagedKvLayout& layout,
             float* k_cache, float* v_cache);

// out[t] = softmax(q[t] . K / sqrt(head_dim)) V over positions [0, positions[t]] of token t's
// sequence, read through its block table row. q/out: [num_tokens][num_heads * head_dim]. Query
// head h reads kv head h / (num_heads / num_kv_heads). `token_seq[t]` is token t's sequence.
void PagedAttention(const StepInput& input, const int32_t* token_seq, const float* q,
                    int32_t num_heads, const PagedKvLayout& layout, const float* k_cache,
                    const float* v_cache, float* out, ThreadPool& pool);

}  // namespace rtgen
