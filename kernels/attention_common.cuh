#pragma once
// Shared device code of the paged attention kernels: one block of kAttnThreads threads handles one
// (query row, query head) over a range of key positions, with an online softmax whose running
// state (max m, sum l, unnormalised output acc) lives in registers. Device code only.

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/device_utils.cuh"

namespace rtgen::kernels {

constexpr int kAttnThreads = 128;
constexpr int kAttnMaxHeadDim = 256;
constexpr int kAttnDimsPerThread = kAttnMaxHeadDim / kAttnThreads;
constexpr int kAttnKeyChunk = kAttnThreads;  // keys scored per pass (one smem score each)

struct AttnSmem {
  float q[kAttnMaxHeadDim];      // query, pre-multiplied by the softmax scale
  float p[kAttnKeyChunk];        // scores, then probabilities, of the current chunk
  int64_t base[kAttnKeyChunk];   // element offset of each chunk key's (slot, kv_head) row
};

struct AttnState {
  float m = -INFINITY;  // running max of scores
  float l = 0.0f;       // running sum of exp(score - m)
  float acc[kAttnDimsPerThread] = {};  // dims threadIdx.x + j * kAttnThreads
};

// Loads q (bf16) into smem, scaled. Ends with a barrier.
__device__ __forceinline__ void AttnLoadQuery(AttnSmem& s, const __nv_bfloat16* q, int head_dim,
                                              float scale) {
  for (int d = threadIdx.x; d < head_dim; d += kAttnThreads) {
    s.q[d] = __bfloat162float(q[d]) * scale;
  }
  __syncthreads();
}

// Attends over key positions [begin, end) of one sequence. `block_table` maps position / block_size
// to a cache block; `kv_stride` = num_kv_heads * head_dim elements per slot.
__device__ __forceinline__ void AttnRange(AttnSmem& s, AttnState& st,
                                          const __nv_bfloat16* k_cache,
                                          const __nv_bfloat16* v_cache,
                                          const int32_t* block_table, int block_size,
                                          int kv_stride, int kv_head, int head_dim, int begin,
                                          int end) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kAttnThreads / 32;
  for (int c = begin; c < end; c += kAttnKeyChunk) {
    const int n = min(kAttnKeyChunk, end - c);
    for (int j = warp; j < n; j += kWarps) {
      const int key = c + j;
      const int64_t slot =
          static_cast<int64_t>(block_table[key / block_size]) * block_size + key % block_size;
      const int64_t base = slot * kv_stride + static_cast<int64_t>(kv_head) * head_dim;
      const __nv_bfloat16* kp = k_cache + base;
      float dot = 0.0f;
      for (int d = lane; d < head_dim; d += 32) dot += s.q[d] * __bfloat162float(kp[d]);
      dot = WarpSum(dot);
      if (lane == 0) {
        s.p[j] = dot;
        s.base[j] = base;
      }
    }
    __syncthreads();
    float chunk_max = -INFINITY;
    for (int j = 0; j < n; ++j) chunk_max = fmaxf(chunk_max, s.p[j]);
    const float new_m = fmaxf(st.m, chunk_max);
    const float alpha = expf(st.m - new_m);  // 0 on the first chunk (m = -inf)
    __syncthreads();                          // everyone has read the raw scores
    if (threadIdx.x < n) s.p[threadIdx.x] = expf(s.p[threadIdx.x] - new_m);
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kAttnDimsPerThread; ++u) st.acc[u] *= alpha;
    for (int j = 0; j < n; ++j) {
      const float pj = s.p[j];
      sum += pj;
      const __nv_bfloat16* vp = v_cache + s.base[j];
#pragma unroll
      for (int u = 0; u < kAttnDimsPerThread; ++u) {
        const int d = threadIdx.x + u * kAttnThreads;
        if (d < head_dim) st.acc[u] += pj * __bfloat162float(vp[d]);
      }
    }
    st.l = st.l * alpha + sum;
    st.m = new_m;
    __syncthreads();  // the next chunk overwrites p and base
  }
}

}  // namespace rtgen::kernels
