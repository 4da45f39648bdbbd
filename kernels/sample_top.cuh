#pragma once
// Device code of the sampler (kernels/sampling.cu): a logits row's top-n tokens with their
// logprobs, in the CPU sampler's order (engine/sampling/sampler.cc TopLogprobs: logit
// descending, the lowest id first on ties). A block finds the top-n keys of a range of ids
// (BlockTopKeys); a greedy row split over blocks has each block find its part's, and the last
// block to finish merges the parts' lists (MergeTopLists).

#include <cfloat>
#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/sample_row_params.h"

namespace rtgen::kernels {

// A logit as the CPU sampler takes it (engine/sampling/sampler.cc SampleToken): NaN counts as -inf
// (no mass; fmaxf returns the other operand) and +inf as the largest finite float (the +inf ids
// share all the mass, and no inf - inf = NaN in the sums and logprobs).
__device__ __forceinline__ float FiniteLogit(float f) {
  return fminf(fmaxf(f, -INFINITY), FLT_MAX);
}

// Monotone map of a float to uint32 (larger float -> larger integer); -0 maps as +0, since the
// CPU's comparison ties them, and NaN and +inf as FiniteLogit maps them.
__device__ __forceinline__ uint32_t OrderedBits(float f) {
  f = FiniteLogit(f);
  const uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float OrderedBits(f) came from.
__device__ __forceinline__ float FromOrderedBits(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

// A row's top-n keys. A token's key is OrderedBits(l) above its id bits, then vocab - 1 - id,
// plus one: keys are unique, >= 1 (0 marks "none"), and a larger key comes first (logit
// descending, the lower id first on ties).
struct TopKeys {
  int vocab;
  int id_bits;  // bits of vocab - 1 - id

  __device__ explicit TopKeys(int v) : vocab(v), id_bits(1) {
    while ((1 << id_bits) < vocab) ++id_bits;
  }
  __device__ uint64_t Key(uint32_t ordered, int i) const {
    return ((static_cast<uint64_t>(ordered) << id_bits) | static_cast<uint64_t>(vocab - 1 - i)) +
           1;
  }
  __device__ uint64_t Key(int i, float x) const { return Key(OrderedBits(x), i); }
  // The entry of key k (>= 1): its id and logprob x - lse.
  __device__ SampleTopEntry Entry(uint64_t k, float lse) const {
    const uint64_t key = k - 1;
    const int id = vocab - 1 - static_cast<int>(key & ((uint64_t{1} << id_bits) - 1));
    return SampleTopEntry{id, FromOrderedBits(static_cast<uint32_t>(key >> id_bits)) - lse};
  }
};

// Calls f(i, l[i]) for the ids of [begin, end) this thread owns, in ascending order: float4 c
// (ids 4c..4c+3) for c = begin / 4 + threadIdx.x + j * kThreads when `vec` (the row 16-byte
// aligned, begin % 4 == 0), then the tail's ids one by one; ids begin + threadIdx.x +
// j * kThreads otherwise. Eight loads in flight per thread.
template <int kThreads, typename F>
__device__ __forceinline__ void ForEachOwnLogit(const float* l, int begin, int end, bool vec,
                                                F f) {
  constexpr int kBatch = 8;
  const int e4 = vec ? end / 4 : begin / 4;
  const float4* l4 = reinterpret_cast<const float4*>(l);
  for (int c0 = begin / 4 + threadIdx.x; c0 < e4; c0 += kBatch * kThreads) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = c0 + u * kThreads;
      v[u] = c < e4 ? l4[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = c0 + u * kThreads;
      if (c >= e4) break;
      f(4 * c, v[u].x), f(4 * c + 1, v[u].y), f(4 * c + 2, v[u].z), f(4 * c + 3, v[u].w);
    }
  }
  for (int i0 = max(begin, 4 * e4) + threadIdx.x; i0 < end; i0 += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kThreads;
      v[u] = i < end ? l[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (i0 + u * kThreads >= end) break;
      f(i0 + u * kThreads, v[u]);
    }
  }
}

// Candidates BlockTopKeys ranks in shared memory; more go to TopKeysByInsertion.
constexpr int kTopCandidates = 1024;

struct TopScratch {  // shared memory of BlockTopKeys and MergeTopLists
  uint64_t keys[kTopCandidates];  // candidates, or the warps' lists of the insertion path
  unsigned long long threshold;   // BlockTopKeys' first bound, a maximum over the warps
  unsigned long long spread;      // its second one, a minimum over the warps
  int warps;                      // warps with ids in the range
  int count;
};

// Each of the `count` keys in s.keys (unique, or 0) placed by its rank among them: emit(r, key)
// for ranks r < n. `lane` / `lanes`: this thread's index among those that share the work.
template <typename Emit>
__device__ __forceinline__ void EmitByRank(const TopScratch& s, int count, int n, int lane,
                                           int lanes, Emit emit) {
  for (int c = lane; c < count; c += lanes) {
    const uint64_t k = s.keys[c];
    if (k == 0) continue;
    int r = 0;
    for (int j = 0; j < count; ++j) r += s.keys[j] > k;
    if (r < n) emit(r, k);
  }
}

// The slow path of BlockTopKeys (same arguments), for ranges whose candidates overflow its
// threshold. Each warp keeps the n best keys of its share of the ids spread over its lanes
// (lane j the j-th best, descending) and inserts a candidate only when it beats the n-th; the
// warps' lists are then ranked against each other. An insertion is a chain of dependent
// shuffles: as the only path (one block a row), n = 20 added 34 us to a SmolLM2 batch-1 step
// on the H200 (session 36, pipelined TPOT 0.429 -> 0.463 ms).
template <int kThreads, typename Emit>
__device__ void TopKeysByInsertion(const float* l, int begin, int end, int n, const TopKeys& keys,
                                   bool vec, TopScratch& s, Emit emit) {
  constexpr int kWarps = kThreads / 32;
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
  // Warp w's ids: [begin + w * per, + per), per a multiple of 4 (whole float4s when vec); empty
  // (first == last) for the last warps of a short range, which then load nothing: the float4
  // at `end` may hold a neighbour's ids.
  const int per = ((end - begin + kWarps - 1) / kWarps + 3) / 4 * 4;
  const int first = min(end, begin + warp * per), last = min(end, first + per);
  constexpr int kBatch = 8;  // loads in flight per lane
  // Loop bounds are the warp's (offer's ballots need every lane); a lane's ids past `last`
  // offer 0.
  if (vec) {
    const float4* l4 = reinterpret_cast<const float4*>(l);
    // Inside the row's stride (a multiple of 4 when vec).
    const int last4 = first < last ? (last + 3) / 4 : first / 4;
    for (int base = first / 4; base < last4; base += kBatch * 32) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int c = base + u * 32 + lane;
        v[u] = c < last4 ? l4[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = 4 * (base + u * 32 + lane);
        const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) offer(i + e < last ? keys.Key(i + e, x[e]) : 0);
      }
    }
  } else {
    for (int base = first; base < last; base += kBatch * 32) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * 32 + lane;
        v[u] = i < last ? l[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * 32 + lane;
        offer(i < last ? keys.Key(i, v[u]) : 0);
      }
    }
  }
  __syncthreads();  // the caller's reads of s are done
  if (lane < n) s.keys[warp * n + lane] = mine;
  __syncthreads();
  EmitByRank(s, kWarps * n, n, threadIdx.x, kThreads, emit);
}

// Block-wide, every thread of a block of kThreads: emit(r, key) for the keys of the
// min(n, end - begin) largest of the ids [begin, end), r their rank (0: the largest), each r
// once (n in 1..kMaxTopLogprobs; `vec` as ForEachOwnLogit's).
// A threshold first, from each thread's largest key: the range's n-th key is at least the n-th
// largest of any warp's lanes' keys (n distinct keys reach it), so at least the largest of
// those over the warps; and, with W warps holding ids and j = ceil(n / W), at least the smallest
// over those warps of their j-th largest (W * j >= n keys reach it). The threshold is the larger
// bound: the first is tight when threads own many ids (a whole row), the second when they own a
// few (a split row's part: SmolLM2's 49152 ids in 32 parts are one float4 for each of 384
// threads, so 12 warps). Scans compare 32-bit ordered logits (the id only on a tie), and build
// 64-bit keys only for the ids at or above the threshold, which are gathered in shared memory
// and placed by their rank among them. Past kTopCandidates (rows built to defeat the bounds),
// the insertion path.
template <int kThreads, typename Emit>
__device__ void BlockTopKeys(const float* l, int begin, int end, int n, const TopKeys& keys,
                             bool vec, TopScratch& s, Emit emit) {
  static_assert(kMaxTopLogprobs <= 32 && kThreads / 32 * kMaxTopLogprobs <= kTopCandidates);
  uint32_t best_o = 0;  // the thread's largest ordered logit and its lowest id (-1: no id)
  int best_i = -1;
  ForEachOwnLogit<kThreads>(l, begin, end, vec, [&](int i, float x) {
    const uint32_t o = OrderedBits(x);
    if (best_i < 0 || o > best_o) best_o = o, best_i = i;  // ids ascend: the lowest on ties
  });
  const uint64_t best = best_i < 0 ? 0 : keys.Key(best_o, best_i);
  int rank = 0;  // among the warp's lanes (keys unique; lanes without ids share 0)
  for (int o = 1; o < 32; ++o) {
    rank += __shfl_sync(kFullMask, best, (threadIdx.x + o) & 31) > best;
  }
  if (threadIdx.x == 0) s.threshold = 0, s.spread = ~0ull, s.warps = 0, s.count = 0;
  __syncthreads();
  const int lanes_with_ids = __popc(__ballot_sync(kFullMask, best != 0));
  if ((threadIdx.x & 31) == 0 && lanes_with_ids > 0) atomicAdd(&s.warps, 1);
  // A warp with fewer than n lanes holding ids bounds nothing (its n-th key is 0).
  if (rank == n - 1 && best != 0) atomicMax(&s.threshold, static_cast<unsigned long long>(best));
  __syncthreads();
  if (s.warps > 0 && lanes_with_ids > 0) {
    const int j = (n + s.warps - 1) / s.warps;
    if (lanes_with_ids < j) {  // its j-th key is 0: no bound
      if ((threadIdx.x & 31) == 0) atomicMin(&s.spread, 0ull);
    } else if (rank == j - 1) {
      atomicMin(&s.spread, static_cast<unsigned long long>(best));
    }
  }
  __syncthreads();
  const uint64_t threshold = s.warps > 0 && s.spread > s.threshold ? s.spread : s.threshold;
  // key >= threshold <=> o > its ordered logit, or o equal and the id at most its id.
  const uint32_t t_o =
      threshold == 0 ? 0 : static_cast<uint32_t>((threshold - 1) >> keys.id_bits);
  const int t_i = threshold == 0 ? 0x7fffffff : keys.Entry(threshold, 0.0f).token;
  ForEachOwnLogit<kThreads>(l, begin, end, vec, [&](int i, float x) {
    const uint32_t o = OrderedBits(x);
    if (threshold != 0 && (o < t_o || (o == t_o && i > t_i))) return;
    const int slot = atomicAdd(&s.count, 1);
    if (slot < kTopCandidates) s.keys[slot] = keys.Key(o, i);
  });
  __syncthreads();
  const int count = s.count;
  if (count > kTopCandidates) {
    TopKeysByInsertion<kThreads>(l, begin, end, n, keys, vec, s, emit);
  } else {
    EmitByRank(s, count, n, threadIdx.x, kThreads, emit);
  }
  __syncthreads();  // `s` may be reused
}

// Warp-wide (one warp): the row's top-n from `parts` (<= 32) lists of n keys each (lists[p *
// kMaxTopLogprobs + j], each list descending, 0 past its range's ids; read with ld.cg: other
// blocks wrote them), written to out[0, min(n, vocab)) with logprobs x - lse. Only keys at or
// above a lower bound of the row's n-th key are ranked: the larger of the lists' largest n-th
// key and their smallest j-th, j = ceil(n / parts) (parts * j keys reach it). With the first
// alone, n = 20 added 35 us to a SmolLM2 batch-1 step (32 lists of 20; n = 5: 7 us), with both
// 14 us (session 36, H200, pipelined TPOT).
__device__ __forceinline__ void MergeTopLists(const uint64_t* lists, int parts, int n,
                                              const TopKeys& keys, float lse,
                                              SampleTopEntry* out, TopScratch& s) {
  const int lane = threadIdx.x & 31;
  const int j = (n + parts - 1) / parts;  // parts * j >= n
  // Every load issued before any is used: one L2 round trip, not one per key.
  uint64_t bound = lane < parts ? __ldcg(&lists[lane * kMaxTopLogprobs + n - 1]) : 0;
  uint64_t spread = lane < parts ? __ldcg(&lists[lane * kMaxTopLogprobs + j - 1]) : ~0ull;
  uint64_t k[kMaxTopLogprobs];  // keys lane + 32 * u of the lists' parts * n
#pragma unroll
  for (int u = 0; u < kMaxTopLogprobs; ++u) {
    const int at = lane + 32 * u;
    k[u] = at < parts * n ? __ldcg(&lists[(at / n) * kMaxTopLogprobs + at % n]) : 0;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t other = __shfl_xor_sync(kFullMask, bound, o);
    const uint64_t other_spread = __shfl_xor_sync(kFullMask, spread, o);
    bound = other > bound ? other : bound;
    spread = other_spread < spread ? other_spread : spread;
  }
  bound = spread > bound ? spread : bound;
  if (lane == 0) s.count = 0;
  __syncwarp();
#pragma unroll
  for (int u = 0; u < kMaxTopLogprobs; ++u) {
    if (k[u] != 0 && k[u] >= bound) s.keys[atomicAdd(&s.count, 1)] = k[u];
  }
  __syncwarp();
  const int count = *static_cast<volatile const int*>(&s.count);
  EmitByRank(s, count, n, lane, 32, [&](int r, uint64_t k) { out[r] = keys.Entry(k, lse); });
}

}  // namespace rtgen::kernels
