#pragma once
// Device code of the sampler (kernels/sampling.cu): a logits row's top-n tokens with their
// logprobs, in the CPU sampler's order (engine/sampling/sampler.cc TopLogprobs: logit
// descending, the lowest id first on ties).

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/sample_row_params.h"

namespace rtgen::kernels {

// Monotone map of a float to uint32 (larger float -> larger integer).
__device__ __forceinline__ uint32_t OrderedBits(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float OrderedBits(f) came from.
__device__ __forceinline__ float FromOrderedBits(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

// Block-wide, every thread of a block of kThreads: writes the n (1..kMaxTopLogprobs, at most
// vocab) most likely ids of the row l[0, vocab) to out[0, n) with logprob l[id] - lse.
// A token's key is OrderedBits(l) (-0 as +0) above its id bits, then vocab - 1 - id, plus one: keys are
// unique, >= 1 (0 marks "none"), and a larger key comes first. Each warp keeps the n best keys of
// its own ids spread over its lanes (lane j the j-th best, descending) and inserts a candidate
// only when it beats the n-th, which after the first few loads is rare; the warps' lists are
// then ranked against each other. `lists`: shared memory of kThreads / 32 * kMaxTopLogprobs keys.
// `vec`: the row is 16-byte aligned (float4 loads).
template <int kThreads>
__device__ void TopLogprobs(const float* l, int vocab, int n, float lse, bool vec,
                            SampleTopEntry* out, uint64_t* lists) {
  constexpr int kWarps = kThreads / 32;
  static_assert(kMaxTopLogprobs <= 32);
  n = min(n, vocab);
  int id_bits = 1;
  while ((1 << id_bits) < vocab) ++id_bits;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t mine = 0;  // lanes < n: this warp's lane-th best key so far
  uint64_t nth = 0;   // its n-th best (0 while it has fewer than n)
  const auto offer = [&](uint64_t key) {  // warp-wide; key 0 offers nothing
    unsigned want = __ballot_sync(kFullMask, key > nth);
    while (want != 0) {
      const int src = __ffs(want) - 1;
      want &= want - 1;
      const uint64_t k = __shfl_sync(kFullMask, key, src);
      if (k <= nth) continue;  // the same on every lane (k and nth are)
      const int pos = __popc(__ballot_sync(kFullMask, lane < n && mine > k));
      const uint64_t up = __shfl_up_sync(kFullMask, mine, 1);
      if (lane < n && lane > pos) mine = up;
      if (lane == pos) mine = k;
      nth = __shfl_sync(kFullMask, mine, n - 1);
    }
  };
  const auto key_of = [&](int i, float x) {
    x = x == 0.0f ? 0.0f : x;  // -0 ties with +0, as the CPU's comparison has it
    return ((static_cast<uint64_t>(OrderedBits(x)) << id_bits) |
            static_cast<uint64_t>(vocab - 1 - i)) + 1;
  };
  // Warp w's ids: [w * per, (w + 1) * per), per a multiple of 4 (whole float4s when vec).
  const int per = ((vocab + kWarps - 1) / kWarps + 3) / 4 * 4;
  const int begin = min(vocab, warp * per), end = min(vocab, begin + per);
  constexpr int kBatch = 8;  // loads in flight per lane
  // Loop bounds are the warp's (offer's ballots need every lane); a lane's ids past `end` offer 0.
  if (vec) {
    const float4* l4 = reinterpret_cast<const float4*>(l);
    const int end4 = (end + 3) / 4;  // inside the row's stride: it is a multiple of 4 when vec
    for (int base = begin / 4; base < end4; base += kBatch * 32) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int c = base + u * 32 + lane;
        v[u] = c < end4 ? l4[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = 4 * (base + u * 32 + lane);
        const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) offer(i + e < end ? key_of(i + e, x[e]) : 0);
      }
    }
  } else {
    for (int base = begin; base < end; base += kBatch * 32) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * 32 + lane;
        v[u] = i < end ? l[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * 32 + lane;
        offer(i < end ? key_of(i, v[u]) : 0);
      }
    }
  }
  if (lane < kMaxTopLogprobs) lists[warp * kMaxTopLogprobs + lane] = lane < n ? mine : 0;
  __syncthreads();
  // A key's rank: how many keys of every warp's list are larger (unique keys: ranks 0.. differ).
  for (int t = threadIdx.x; t < kWarps * n; t += kThreads) {
    const uint64_t k = lists[(t / n) * kMaxTopLogprobs + t % n];
    if (k == 0) continue;
    int rank = 0;
    for (int w = 0; w < kWarps; ++w) {
      for (int j = 0; j < n; ++j) rank += lists[w * kMaxTopLogprobs + j] > k;
    }
    if (rank >= n) continue;
    const uint64_t key = k - 1;
    const int id = vocab - 1 - static_cast<int>(key & ((uint64_t{1} << id_bits) - 1));
    out[rank] = SampleTopEntry{id, FromOrderedBits(static_cast<uint32_t>(key >> id_bits)) - lse};
  }
  __syncthreads();  // `lists` may be reused
}

}  // namespace rtgen::kernels
