#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/vector_ops.h"

namespace rtgen {

void WriteKv(const StepInput& input, const float* k, const float* v, const PagedKvLayout& layout,
             float* k_cache, float* v_cache) {
  const int64_t row = layout.slot_stride();
  const int64_t num_slots = static_cast<int64_t>(layout.num_blocks) * layout.block_size;
  for (int32_t t = 0; t < input.num_tokens(); ++t) {
    const int64_t slot = input.slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;
    std::copy_n(k + t * row, row, k_cache + slot * row);
    std::copy_n(v + t * row, row, v_cache + slot * row);
  }
}

void PagedAttention(const StepInput& input, const int32_t* token_seq, const float* q,
                    int32_t num_heads, const PagedKvLayout& layout, const float* k_cache,
                    const float* v_cache, float* out, ThreadPool& pool) {
  const int32_t head_dim = layout.head_dim;
  const int32_t group = num_heads / layout.num_kv_heads;
  const int64_t slot_stride = layout.slot_stride();
  const int64_t q_stride = static_cast<int64_t>(num_heads) * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t num_tasks = static_cast<int64_t>(input.num_tokens()) * num_heads;

  pool.ParallelFor(num_tasks, 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> scores;
    std::vector<int64_t> slots;  // slot of each visible position
    for (int64_t task = begin; task < end; ++task) {
      const int32_t t = static_cast<int32_t>(task / num_heads);
      const int32_t h = static_cast<int32_t>(task % num_heads);
      const int32_t seq = token_seq[t];
      const int32_t* table = input.block_tables.data() +
                             static_cast<int64_t>(seq) * input.max_blocks_per_seq;
      // Causal: positions [0, position], never beyond what the sequence holds after this step.
      const int32_t len = std::min(input.positions[t] + 1, input.context_lens[seq]);
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * head_dim;
      const int64_t kv_offset = static_cast<int64_t>(h / group) * head_dim;
      float* oh = out + t * q_stride + static_cast<int64_t>(h) * head_dim;
      std::fill_n(oh, head_dim, 0.0f);
      if (len <= 0) continue;

      scores.resize(len);
      slots.resize(len);
      float max_score = -INFINITY;
      for (int32_t p = 0; p < len; ++p) {
        const int64_t block = table[p / layout.block_size];
        slots[p] = (block * layout.block_size + p % layout.block_size) * slot_stride + kv_offset;
        scores[p] = Dot(qh, k_cache + slots[p], head_dim) * scale;
        max_score = std::max(max_score, scores[p]);
      }
      float denom = 0.0f;
      for (int32_t p = 0; p < len; ++p) {
        const float e = std::exp(scores[p] - max_score);
        denom += e;
        const float* vp = v_cache + slots[p];
        for (int32_t d = 0; d < head_dim; ++d) oh[d] += e * vp[d];
      }
      const float inv = 1.0f / denom;
      for (int32_t d = 0; d < head_dim; ++d) oh[d] *= inv;
    }
  });
}

}  // namespace rtgen
