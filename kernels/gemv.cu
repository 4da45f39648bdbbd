// Decode GEMV on tensor cores (see gemv.h).
//
// One block owns a tile of 8 output features (weight rows n0..n0+7). Per mma.m16n8k16 the
// "A" operand (16 x 16) is the batch: row b = input row b (rows >= m are zero), the "B" operand
// (16 x 8) is the weight tile, and D (16 x 8, fp32) accumulates y[b][n0 + j]. The reduction
// index k only has to be the same permutation in A and B, so each thread feeds the mma straight
// from its own 16-byte loads: thread (g = lane / 4, t = lane % 4) loads 8 consecutive k of weight
// row n0 + g and of input rows g and g + 8 at chunk c; elements 0-3 form the fragment of one
// mma (fragment k 2t, 2t+1, 2t+8, 2t+9), elements 4-7 that of a second. A warp therefore reads
// 64 contiguous bytes of each of its 8 weight rows per step, `unroll` steps back to back (loads
// first, then the mmas), and the block's warps take interleaved groups of steps over k and add
// their partial tiles in shared memory in warp order (deterministic).
//
// SwiGLU variant (GemvSiluMul): the weight is [gate; up] (2 * inter rows) and a block owns 4
// features f0..f0+3 of both halves: tile rows 0-3 are gate rows f0.., rows 4-7 the up rows
// inter + f0... Its epilogue rounds gate and up to bf16 (what the unfused path stores) and writes
// act = silu(gate) * up with SiluMul's arithmetic, so the separate SiLU·mul launch goes away.
//
// RoPE variant (GemvRopeKvStore): blocks of the q and k parts own 4 rotation pairs of one head:
// tile rows 0-3 are features i0..i0+3 of the head, rows 4-7 features i0+half.. (their partners);
// blocks of the v part own 8 consecutive features. The epilogue rounds to bf16, rotates the pairs
// and writes q, k, v to y and k, v to the cache slot; the angles and slots are read before the
// PDL wait (step arrays, written by no kernel).

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "kernels/aligned.h"
#include "kernels/decode_partitions.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/gemv.h"
#include "kernels/gemv_rows.h"
#include "kernels/gemv_slab.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/mma.cuh"
#include "kernels/norm_link.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kTileRows = 8;  // output features per block (the mma's n)

__device__ __forceinline__ void Store(const GemvParams& p, int row, int col, float v) {
  const int64_t o = static_cast<int64_t>(row) * p.n + col;
  if (p.y_f32) {
    static_cast<float*>(p.y)[o] = v;
  } else {
    static_cast<__nv_bfloat16*>(p.y)[o] = __float2bfloat16(v);
  }
}

// Unpredicated streamed weight load (full groups). Volatile: stays where it is written, so the
// next group's loads are issued before this group's mmas. kEvictFirst: the line is marked
// evict-first in L2 by `policy` (EvictFirstPolicy; unused otherwise).
template <bool kEvictFirst>
__device__ __forceinline__ uint4 LoadWeightsFull(const uint4* p, uint64_t policy) {
  uint4 v;
  if constexpr (kEvictFirst) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(policy));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  }
  return v;
}

__device__ __forceinline__ uint4 Select(bool keep, uint4 v) {
  return keep ? v : make_uint4(0, 0, 0, 0);
}

// What a block does with its tile of sums (see the top).
enum class Epilogue {
  kStore,   // y[m, n], bf16 or fp32
  kSwiGlu,  // p.n = 2 * inter weight rows [gate; up], y = act [m, inter] bf16
  kRope,    // p.n = qkv rows, RoPE on q and k, k and v also to the cache (GemvRopeParams)
};

// The tile of a RoPE block: rope_pair0 >= 0 for a q/k block (its first pair index over heads
// h * half + i), else the first v feature n0.
struct RopeTile {
  int rope_pair0 = -1;
  int n0 = 0;
};

__device__ __forceinline__ RopeTile RopeTileOf(const GemvRopeParams& r) {
  const int half = r.head_dim >> 1;
  const int rope_tiles = (r.num_heads + r.num_kv_heads) * half / 4;
  RopeTile tile;
  if (static_cast<int>(blockIdx.x) < rope_tiles) {
    tile.rope_pair0 = blockIdx.x * 4;
  } else {
    tile.n0 = (r.num_heads + r.num_kv_heads) * r.head_dim +
              (blockIdx.x - rope_tiles) * kTileRows;
  }
  return tile;
}

// Weight row of tile row g for a RoPE block: pairs (i, i + half) of one head.
__device__ __forceinline__ int RopeWeightRow(const GemvRopeParams& r, const RopeTile& tile,
                                             int g) {
  if (tile.rope_pair0 < 0) return tile.n0 + g;
  const int half = r.head_dim >> 1;
  const int pair = tile.rope_pair0 + (g & 3);
  return (pair / half) * r.head_dim + pair % half + (g < 4 ? 0 : half);
}

// Sum of the W warps' partial tiles at (row, j), in warp order (deterministic; every epilogue
// adds them the same way).
template <int W>
__device__ __forceinline__ float TileSum(const float (&partial)[W][16][kTileRows], int row,
                                         int j) {
  float s = partial[0][row][j];
#pragma unroll
  for (int v = 1; v < W; ++v) s += partial[v][row][j];
  return s;
}

// A tile sum of input row `row` scaled by a norm consumer's 1 / rms of that row (kLink;
// inv_rms: one per input row), or as it is (inv_rms unread).
template <bool kLink>
__device__ __forceinline__ float ScaledBy(float sum, const float* inv_rms, int row) {
  if constexpr (kLink) {
    return sum * inv_rms[row];
  } else {
    return sum;
  }
}

// Where a block reads its input row: x in global memory, or a row it formed in shared memory
// after its wait (rebuilt from pending products: GemvPendingRow; merged from attention's key
// partitions: GemvMergedInput).
enum class XSource { kGlobal, kRebuilt, kMerged };

// A shared-memory (kShared: a formed row) or read-only global 16-byte load of x.
template <bool kShared>
__device__ __forceinline__ uint4 LoadX(const uint4* p) {
  if constexpr (kShared) {
    return *p;
  } else {
    return __ldg(p);
  }
}

// A pending product (gemv.h GemvPendingRow) as the residual's update, rounded to bf16 as a
// GEMV stores it.
__device__ __forceinline__ float PendingUpdate(long long pending) {
  return RoundBf16(PendingProduct(pending));
}

// A consumer's input row rebuilt from pending products: x[i] = bf16(h * weight[i]) with
// h = residual[i] + bf16(pending[i]), into shared memory; returns sum(h^2), the same in every
// block (fixed order). Called by every thread (block barriers inside: x is visible after it).
__device__ __forceinline__ float RebuildRow(const GemvPendingRow& rb, int k, __nv_bfloat16* x) {
  constexpr int kBatch = 4;  // elements a thread loads before it uses the first
  __shared__ float scratch[32];
  float sq = 0.0f;
  for (int i0 = threadIdx.x; i0 < k; i0 += kBatch * blockDim.x) {
    float res[kBatch], weight[kBatch];
    long long pending[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      const bool in = i < k;
      res[j] = in ? __ldcg(rb.residual + i) : 0.0f;
      weight[j] = in ? __ldg(rb.weight + i) : 0.0f;
      pending[j] = in ? __ldcg(rb.pending + i) : 0;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      if (i >= k) continue;
      const float h = res[j] + PendingUpdate(pending[j]);
      x[i] = __float2bfloat16(h * weight[j]);
      sq += h * h;
    }
  }
  return BlockSum(sq, scratch);
}

// The input row merged from attention's partitions (GemvMergedInput) into shared memory, of
// `parts` partitions (HeldPartitionsOf the context): thread c forms the eight elements of chunk
// c (query head 8 c / head_dim), online over the partitions in order, kBatch partitions' partials
// requested before the first is used (one round trip to L2 for up to kBatch). Called by every
// thread; x is visible after the barrier at its end.
__device__ __forceinline__ void MergeRow(const GemvMergedInput& mi, int parts, int k,
                                         __nv_bfloat16* x) {
  constexpr int kBatch = 4;
  for (int c = threadIdx.x; c < k / 8; c += blockDim.x) {
    const int head = c * 8 / mi.head_dim, d0 = c * 8 % mi.head_dim;
    const int64_t first = static_cast<int64_t>(head) * mi.num_splits;
    float acc[8] = {};
    float mx = -INFINITY, lsum = 0.0f;
    for (int s0 = 0; s0 < parts; s0 += kBatch) {
      float2 ml[kBatch];
      float4 lo[kBatch], hi[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const bool in = s0 + j < parts;
        const int64_t part = first + (in ? s0 + j : 0);
        const float4* po =
            reinterpret_cast<const float4*>(mi.partial_out + part * mi.head_dim + d0);
        ml[j] = in ? __ldcg(reinterpret_cast<const float2*>(mi.partial_ml) + part)
                   : make_float2(-INFINITY, 0.0f);
        lo[j] = in ? __ldcg(po) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        hi[j] = in ? __ldcg(po + 1) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (s0 + j >= parts) continue;  // a held partition's max is finite (it has keys)
        const float mn = fmaxf(mx, ml[j].x);
        const float a = mx == -INFINITY ? 0.0f : exp2f(mx - mn), b = exp2f(ml[j].x - mn);
        const float o[8] = {lo[j].x, lo[j].y, lo[j].z, lo[j].w, hi[j].x, hi[j].y, hi[j].z, hi[j].w};
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(acc[e], a, o[e] * b);
        lsum = fmaf(lsum, a, ml[j].y * b);
        mx = mn;
      }
    }
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    uint4 packed;
    packed.x = PackBf16x2(acc[0] * inv, acc[1] * inv);
    packed.y = PackBf16x2(acc[2] * inv, acc[3] * inv);
    packed.z = PackBf16x2(acc[4] * inv, acc[5] * inv);
    packed.w = PackBf16x2(acc[6] * inv, acc[7] * inv);
    reinterpret_cast<uint4*>(x)[c] = packed;
  }
  __syncthreads();
}

// The RoPE block's epilogue: sums of the W warps' partial tiles in warp order (as the plain
// epilogue), scaled by the row's inv_rms where kLink, rounded to bf16; q/k pairs rotated, k and
// v also stored to row r's cache slot.
template <int W, bool kLink>
__device__ __forceinline__ void RopeEpilogue(const GemvParams& p, const GemvRopeParams& r,
                                             const RopeTile& tile,
                                             const float (&partial)[W][16][kTileRows],
                                             const float* s_cos, const float* s_sin,
                                             const int32_t* s_slot, const float* inv_rms) {
  __nv_bfloat16* y = static_cast<__nv_bfloat16*>(p.y);
  const int half = r.head_dim >> 1;
  const int q_dim = r.num_heads * r.head_dim, kv_dim = r.num_kv_heads * r.head_dim;
  const auto sum = [&](int row, int j) {
    return RoundBf16(ScaledBy<kLink>(TileSum<W>(partial, row, j), inv_rms, row));  // as Gemv
  };
  if (tile.rope_pair0 >= 0) {
    for (int idx = threadIdx.x; idx < p.m * 4; idx += W * 32) {
      const int row = idx >> 2, j = idx & 3;
      const int pair = tile.rope_pair0 + j, head = pair / half, i = pair % half;
      const RotatedPair rot = RotateHalf(sum(row, j), sum(row, j + 4), s_cos[idx], s_sin[idx]);
      __nv_bfloat16* out = y + static_cast<int64_t>(row) * p.n + head * r.head_dim + i;
      out[0] = rot.lo;
      out[half] = rot.hi;
      if (head >= r.num_heads && s_slot[row] >= 0) {
        __nv_bfloat16* kc = r.k_cache + static_cast<int64_t>(s_slot[row]) * kv_dim +
                            (head - r.num_heads) * r.head_dim + i;
        kc[0] = rot.lo;
        kc[half] = rot.hi;
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < p.m * kTileRows; idx += W * 32) {
      const int row = idx / kTileRows, j = idx % kTileRows;
      const __nv_bfloat16 v = __float2bfloat16(sum(row, j));
      y[static_cast<int64_t>(row) * p.n + tile.n0 + j] = v;
      if (s_slot[row] >= 0) {
        r.v_cache[static_cast<int64_t>(s_slot[row]) * kv_dim + tile.n0 - q_dim - kv_dim + j] = v;
      }
    }
  }
}

// kHi: m > 8 (input rows 8..15 feed the mma's upper half; otherwise it is zero).
// kLink: the launch has a norm link (gemv.h GemvNormLink; m <= kGemvMaxLinkRows); without one
// none of the link's code is compiled in, so an unlinked launch runs the plain kernel. A linked
// launch of at most 8 rows (!kHi) keeps the join slots and scales of 8 rows (kLinkRows), so rows
// 9..16 cost registers only in the kernels that take them.
// kSrc kRebuilt: the link's consumer rebuilds x from pending products (GemvPendingRow; with kLink,
// m = 1): every block forms the row in shared memory after the wait and reads x from there;
// kMerged: the same with the row merged from attention's partitions (GemvMergedInput; m = 1).
// rope_early: the RoPE variant releases its dependent before its main loop (TcRopeReleasesEarly).
template <int W, int U, bool kHi, Epilogue kEpi, bool kEvictFirst, bool kLink, XSource kSrc,
          bool kXAhead>
__global__ void __launch_bounds__(W * 32)
    GemvKernel(GemvParams p, GemvRopeParams r, bool rope_early) {
  RTGEN_TRACE_KERNEL(kGemv);
  constexpr bool kSwiGlu = kEpi == Epilogue::kSwiGlu;
  constexpr bool kRope = kEpi == Epilogue::kRope;
  constexpr bool kRebuild = kSrc == XSource::kRebuilt;
  constexpr bool kShared = kSrc != XSource::kGlobal;  // x formed in shared memory
  if (blockIdx.y > 0) {  // slice y of the rows (gemv.h kGemvMaxSlicedRows); no link then
    const int row0 = blockIdx.y * kGemvMaxRows;
    const int64_t y_row = kEpi == Epilogue::kSwiGlu ? p.n >> 1 : p.n;  // elements a y row
    p.x += static_cast<int64_t>(row0) * p.k;
    p.y = static_cast<char*>(p.y) + row0 * y_row * (p.y_f32 ? 4 : 2);
    if constexpr (kEpi == Epilogue::kRope) {
      r.positions += row0;
      r.slot_mapping += row0;
    }
    p.m -= row0;
  }
  p.m = min(p.m, kGemvMaxRows);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kTileRows;
  const int inter = p.n >> 1;
  const int f0 = blockIdx.x * (kTileRows / 2);  // kSwiGlu: the block's first feature
  RopeTile rope_tile;
  if constexpr (kRope) rope_tile = RopeTileOf(r);
  // Rows past n (past inter for a SwiGLU half) load the last row again (in bounds); their results
  // are not stored. (RoPE tiles are always whole: n is a multiple of 8.)
  const int wrow = kSwiGlu ? (g < 4 ? 0 : inter) + min(f0 + (g & 3), inter - 1)
                   : kRope ? RopeWeightRow(r, rope_tile, g)
                           : min(n0 + g, p.n - 1);
  const uint4* w = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(wrow) * p.k) + t;
  // Input rows past m read row 0 (an L1 hit shared with the threads of row 0) and use zeros.
  const bool has_x0 = g < p.m, has_x1 = kHi && g + 8 < p.m;
  __shared__ __align__(16) __nv_bfloat16 s_x[kShared ? kGemvMaxRebuildK : 8];
  const uint4* x0 =
      kShared ? reinterpret_cast<const uint4*>(s_x) + t
               : reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(has_x0 ? g : 0) * p.k) +
                     t;
  const uint4* x1 =
      reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(has_x1 ? g + 8 : 0) * p.k) + t;
  const int chunks = p.k >> 3;  // 16-byte chunks per row
  constexpr int kGroup = 4 * U;  // chunks per row per group
  const int full_groups = chunks / kGroup;

  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  static_assert(!kXAhead || (kEpi == Epilogue::kStore && U == 8 && !kHi && !kShared));
  // Full groups, software-pipelined: the weights of this warp's next group are requested before
  // the mmas of the current one, so U 16-byte loads per thread are always in flight.
  uint4 wv[U];
  int grp = warp;
  const uint64_t policy = kEvictFirst ? EvictFirstPolicy() : 0;
  // The partial last group (chunks % kGroup != 0) belongs to warp full_groups % W. When that is
  // the warp's only work (it has no full group: k of a few groups, e.g. SmolLM2's 576), its
  // weights are loaded here too, before the wait, into wv (which the main loop then never
  // touches), so no weight load is left after the wait. Not with batch rows 8..15 (kHi): their
  // variants would need ~40 more registers for it.
  bool tail_early = false;
  if (grp < full_groups) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      wv[u] = LoadWeightsFull<kEvictFirst>(w + grp * kGroup + 4 * u, policy);
    }
  } else if constexpr (!kHi) {
    const int tail = full_groups * kGroup;
    tail_early = tail < chunks && warp == full_groups % W;
    if (tail_early) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        wv[u] = LoadStreamed16(w + tail + 4 * u, tail + 4 * u + t < chunks);
      }
    }
  }
  // RoPE: each (row, pair) angle and each row's cache slot, also before the wait.
  __shared__ float s_cos[kRope ? kGemvMaxRows * 4 : 1], s_sin[kRope ? kGemvMaxRows * 4 : 1];
  __shared__ int32_t s_slot[kRope ? kGemvMaxRows : 1];
  if constexpr (kRope) {
    const int half = r.head_dim >> 1;
    for (int idx = threadIdx.x; idx < p.m * 4; idx += W * 32) {
      const int row = idx >> 2, j = idx & 3;
      if (rope_tile.rope_pair0 >= 0) {
        RopeCosSin(r.positions[row], r.inv_freq[(rope_tile.rope_pair0 + j) % half], &s_cos[idx],
                   &s_sin[idx]);
      }
      if (j == 0) s_slot[row] = r.slot_mapping[row];
    }
  }
  // A norm producer (gemv.h GemvNormLink): thread i < m * kTileRows (in slot i / (32 W), with one
  // or two slots a thread) joins feature i % kTileRows of row i / kTileRows to the residual in the
  // epilogue, each row's features in eight consecutive lanes; the norm's weights are read here,
  // before the wait.
  const GemvNormLink& link = p.link;
  constexpr int kLinkRows = kHi ? kGemvMaxLinkRows : 8;
  constexpr int kJoinSlots = (kLinkRows * kTileRows + W * 32 - 1) / (W * 32);
  const bool producer = kLink && kEpi == Epilogue::kStore && link.sum_sq != nullptr;
  bool joins[kJoinSlots];
  float join_weight[kJoinSlots], join_residual[kJoinSlots];
  long long join_pending[kJoinSlots];  // a producer's pending products (fused MLP), or 0
#pragma unroll
  for (int s = 0; s < kJoinSlots; ++s) {
    const int i = threadIdx.x + s * W * 32, j = i % kTileRows;
    joins[s] = producer && i / kTileRows < p.m && n0 + j < p.n;
    join_weight[s] = joins[s] ? __ldg(link.weight + n0 + j) : 0.0f;
  }
  // kMerged: how many of attention's partitions hold keys, from the context length (a step
  // array, so before the wait).
  const int merged_parts =
      kSrc == XSource::kMerged
          ? HeldPartitionsOf(p.merged.context_lens[0], p.merged.num_splits, p.merged.partition_size)
          : 0;
  // Launched as a programmatic dependent (see Launch): the weights above do not depend on the
  // previous kernel, so their loads overlap its tail; the input rows are read only after it has
  // completed and its writes are visible. A no-op for an ordinary launch.
  PdlWait();
  // The next kernel may start its prologue once every block has got here (launch.h). The RoPE
  // variant's dependent is decode attention, a grid of about one block per SM: launched this
  // early, its blocks would be placed while this grid fills the SMs, several on the few SMs
  // with room, and run slower there; so that variant lets it start after its main loop (unless
  // rope_early).
  if (!kRope || rope_early) PdlLaunchDependents();
  // Written by the kernels before this one, so read after the wait, while the main loop streams:
  // the producer's residual values and pending products (zeroed for the next fused MLP), and a
  // consumer's sum of squares (its 1 / rms scales the sums in the epilogue). Used only in the
  // epilogue; each value is waited for at ArrivesHere below, not at its load, so these loads
  // are in flight together (and with a formed row's). A consumer also zeroes the slot of the norm
  // before, whose consumer is done.
#pragma unroll
  for (int s = 0; s < kJoinSlots; ++s) {  // pending products: one row (GemvSupported)
    const int i = threadIdx.x + s * W * 32, row = i / kTileRows, j = i % kTileRows;
    join_residual[s] =
        joins[s] ? __ldcg(link.residual + static_cast<int64_t>(row) * p.n + n0 + j) : 0.0f;
    const bool pends = joins[s] && link.pending != nullptr;
    join_pending[s] = pends ? __ldcg(link.pending + n0 + j) : 0;
    if (pends) link.pending[n0 + j] = 0;
  }
  // A consumer: thread r < m reads row r's sum.
  unsigned long long link_sum =
      kLink && link.scale_by != nullptr && threadIdx.x < p.m
          ? __ldcg(link.scale_by + threadIdx.x * kNormSumRowStride)
          : 0;
  if (kLink && link.zero_after != nullptr && blockIdx.x == 0 && threadIdx.x < p.m) {
    link.zero_after[threadIdx.x * kNormSumRowStride] = 0;
  }
  float rebuilt_sum_sq = 0.0f;  // kRebuild: sum(h^2) over the rebuilt row
  if constexpr (kRebuild) rebuilt_sum_sq = RebuildRow(link.rebuild, p.k, s_x);
  if constexpr (kSrc == XSource::kMerged) MergeRow(p.merged, merged_parts, p.k, s_x);
  // The link's values arrive here, before the main loop: in flight with a formed row's loads
  // above, but not held across the loop (held there, the merged o GEMV of Llama-3-8B at one row
  // measured ~1 us slower: read as the loop's streamed loads sharing fewer scoreboards).
#pragma unroll
  for (int s = 0; s < kJoinSlots; ++s) {
    ArrivesHere(join_residual[s]);
    ArrivesHere(join_pending[s]);
  }
  ArrivesHere(link_sum);
  for (; grp < full_groups; grp += W) {
    const int next = grp + W;
    uint4 wn[U];
    if (next < full_groups) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        wn[u] = LoadWeightsFull<kEvictFirst>(w + next * kGroup + 4 * u, policy);
      }
    }
    if constexpr (kXAhead) {
      // The group's input chunks all requested before its first multiply (one round trip to L2
      // instead of one per chunk the compiler would interleave with the multiplies).
      uint4 xs[U];
#pragma unroll
      for (int u = 0; u < U; ++u) xs[u] = LoadCached16(x0 + grp * kGroup + 4 * u, has_x0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        Mma(d, xs[u].x, 0u, xs[u].y, 0u, wv[u].x, wv[u].y);
        Mma(d, xs[u].z, 0u, xs[u].w, 0u, wv[u].z, wv[u].w);
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint4 xa = Select(has_x0, LoadX<kShared>(x0 + grp * kGroup + 4 * u));
        const uint4 xb =
            kHi ? Select(has_x1, __ldg(x1 + grp * kGroup + 4 * u)) : uint4{0, 0, 0, 0};
        Mma(d, xa.x, xb.x, xa.y, xb.y, wv[u].x, wv[u].y);
        Mma(d, xa.z, xb.z, xa.w, xb.w, wv[u].z, wv[u].w);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) wv[u] = wn[u];
  }
  // The partial last group, predicated, by the warp whose turn it is (loaded above if early).
  if (full_groups * kGroup < chunks && warp == full_groups % W) {
    const int base = full_groups * kGroup;
    uint4 wt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      wt[u] = tail_early ? wv[u] : LoadStreamed16(w + base + 4 * u, base + 4 * u + t < chunks);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in = base + 4 * u + t < chunks;
      const uint4 xa = kShared ? Select(in && has_x0, x0[base + 4 * u])
                                : LoadCached16(x0 + base + 4 * u, in && has_x0);
      const uint4 xb = kHi ? LoadCached16(x1 + base + 4 * u, in && has_x1) : uint4{0, 0, 0, 0};
      Mma(d, xa.x, xb.x, xa.y, xb.y, wt[u].x, wt[u].y);
      Mma(d, xa.z, xb.z, xa.w, xb.w, wt[u].z, wt[u].w);
    }
  }
  RTGEN_TRACE_MARK(0);  // warp 0's multiplies done
  if (kRope && !rope_early) PdlLaunchDependents();
  // Each input row's 1 / rms (kLink), for the epilogue; published by the barrier below.
  __shared__ float s_inv_rms[kLink ? kLinkRows : 1];
  if (kLink && threadIdx.x < p.m) {
    s_inv_rms[threadIdx.x] = kRebuild ? rsqrtf(rebuilt_sum_sq / p.k + link.eps)
                             : link.scale_by != nullptr
                                 ? NormLinkInvRms(link_sum, link.eps, p.k)
                                 : 1.0f;
  }
  // d[0], d[1]: y[g][n0 + 2t + {0, 1}]; d[2], d[3]: y[g + 8][same].
  // One warp without a link stores its sums from registers; otherwise the warps' partial tiles
  // meet in shared memory.
  if constexpr (W == 1 && kEpi == Epilogue::kStore && !kLink) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >> 1) * 8, col = n0 + 2 * t + (i & 1);
      if (row < p.m && col < p.n) Store(p, row, col, d[i]);
    }
  } else {
    __shared__ float partial[W][16][kTileRows];
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][g + (i >> 1) * 8][2 * t + (i & 1)] = d[i];
    __syncthreads();
    RTGEN_TRACE_MARK(1);  // every warp's sums in shared memory
    if constexpr (kSwiGlu) {
      constexpr int kHalf = kTileRows / 2;
      for (int idx = threadIdx.x; idx < p.m * kHalf; idx += W * 32) {
        const int row = idx / kHalf, j = idx % kHalf;
        if (f0 + j >= inter) continue;
        const float gate = RoundBf16(ScaledBy<kLink>(TileSum<W>(partial, row, j), s_inv_rms, row));
        const float up =
            RoundBf16(ScaledBy<kLink>(TileSum<W>(partial, row, j + kHalf), s_inv_rms, row));
        static_cast<__nv_bfloat16*>(p.y)[static_cast<int64_t>(row) * inter + f0 + j] =
            SiluTimes(gate, up);
      }
    } else if constexpr (kRope) {
      RopeEpilogue<W, kLink>(p, r, rope_tile, partial, s_cos, s_sin, s_slot, s_inv_rms);
    } else if (producer) {  // a norm producer: y is not written
#pragma unroll
      for (int s = 0; s < kJoinSlots; ++s) {
        const int i = threadIdx.x + s * W * 32, row = i / kTileRows, j = i % kTileRows;
        const float residual =
            join_residual[s] + (link.pending != nullptr ? PendingUpdate(join_pending[s]) : 0.0f);
        float sq = joins[s] ? NormLinkJoin(link, static_cast<int64_t>(row) * p.n + n0 + j,
                                           residual, join_weight[s],
                                           ScaledBy<kLink>(TileSum<W>(partial, row, j),
                                                           s_inv_rms, row))
                            : 0.0f;
        // The row's eight lanes, in a fixed order (at one row what a warp sum over lanes 0-7
        // and zeros gives).
        static_assert(kTileRows == 8);
        for (int o = 4; o > 0; o >>= 1) sq += __shfl_xor_sync(kFullMask, sq, o);
        if (j == 0 && row < p.m) NormLinkAddSquares(link, row, sq);
      }
    } else {
      for (int idx = threadIdx.x; idx < p.m * kTileRows; idx += W * 32) {
        const int row = idx / kTileRows, j = idx % kTileRows;
        if (n0 + j >= p.n) continue;
        Store(p, row, n0 + j, ScaledBy<kLink>(TileSum<W>(partial, row, j), s_inv_rms, row));
      }
    }
  }
}

GemvRowsEpilogue RowsEpilogue(Epilogue epi) {
  return epi == Epilogue::kSwiGlu ? GemvRowsEpilogue::kSwiGlu
         : epi == Epilogue::kRope ? GemvRowsEpilogue::kRope
                                  : GemvRowsEpilogue::kStore;
}

// Whether `tuning` can run p with epilogue `epi`: the row-streaming kernel takes one input row
// and no pending products, and the slab kernel what GemvSlabFits says; a producer link needs the
// plain epilogue, a rebuilt row the RoPE one, a merged row the plain one on the tensor-core
// kernel (GemvSupported has checked the rest of a link and of a merged row).
bool TuningFits(const GemvParams& p, const GemvRopeParams& r, const GemvTuning& tuning,
                Epilogue epi) {
  const bool pending = p.link.pending != nullptr || p.link.rebuild.on();
  if (p.merged.on() && (tuning.rows || epi != Epilogue::kStore)) return false;
  return (!tuning.rows || (p.m == 1 && !pending)) &&
         (!tuning.slab || (tuning.rows && GemvSlabFits(p, r, RowsEpilogue(epi)))) &&
         (p.link.sum_sq == nullptr || epi == Epilogue::kStore) &&
         (!p.link.rebuild.on() || epi == Epilogue::kRope);
}

// The default tuning for epilogue `epi`: GemvDefaultTuning's, without the slab kernel where it
// does not fit that epilogue.
GemvTuning DefaultTuningFor(const GemvParams& p, const GemvRopeParams& r, Epilogue epi) {
  GemvTuning tuning = GemvDefaultTuning(p);
  if (tuning.slab && !GemvSlabFits(p, r, RowsEpilogue(epi))) tuning.slab = false;
  return tuning;
}

// Off with RTGEN_PDL=0 (every kernel, launch.h) or RTGEN_GEMV_PDL=0 (the GEMV alone).
bool UsePdl() {
  static const bool use = PdlEnabled() && EnvOnUnlessZero("RTGEN_GEMV_PDL");
  return use;
}

// Whether the tensor-core RoPE variant lets decode attention start before its main loop, where
// attention then copies its K/V tiles before its wait (model_forward.cc PrefetchesKv). By default
// where head_dim is 64 (attention's 16-warp blocks) and the weight is at least kTcRopeEarlyBytes.
// Measured on the H200 (session 38, graph TPOT ms, two rounds, late with 8-warp attention blocks
// -> early with 16-warp blocks, as taken now): Llama-3.2-1B (qkv 12.6 MB) b1 0.829 / 0.826 ->
// 0.797 / 0.798, b2 0.915 / 0.905 -> 0.883 / 0.883, b8 0.959 / 0.963 -> 0.934 / 0.931; SmolLM2-135M
// (1.1 MB) b1 0.431 / 0.430 -> 0.437 / 0.435 (its GEMV ends before the early blocks' copies are
// of use); with 8-warp blocks (head_dim 128) early was slower (session 34: Llama-3-8B b2-b8
// +0.02-0.04 ms).
// RTGEN_TC_ROPE_EARLY_DEPENDENTS=1 / =0: early / late at every shape (A/B).
constexpr int64_t kTcRopeEarlyBytes = int64_t{8} << 20;
bool TcRopeReleasesEarly(const GemvParams& p, int32_t head_dim) {
  static const int forced = EnvChoice("RTGEN_TC_ROPE_EARLY_DEPENDENTS", {"0", "1"});
  if (forced >= 0) return forced == 1;
  return head_dim == 64 && int64_t{p.n} * p.k * 2 >= kTcRopeEarlyBytes;
}

// Whether the plain-store kernel at the widest unroll loads each group's input chunks ahead of
// its multiplies (GemvKernel's kXAhead): at one input row, or a weight of at most
// kXAheadMaxBytes. Measured on the H200 (session 43, graph TPOT ms, three rounds, loaded ahead at
// every 1-8 rows vs not): SmolLM2-135M (down 1.8 MB) b1 0.437-0.438 -> 0.423-0.431, b4
// 0.446-0.448 -> 0.429-0.438, b8 0.486-0.492 -> 0.473-0.481; Llama-3.2-1B b1 0.799-0.803 ->
// 0.778-0.785, but b4 0.916-0.923 -> 0.923-0.934 and b8 0.925-0.937 -> 0.954-0.964 (o 8 MB, down
// 32 MB: at 4-8 rows each block's input rows are as many bytes as its weights, and all of them
// asked of L2 at once hold up the weight stream).
constexpr int64_t kXAheadMaxBytes = int64_t{4} << 20;
bool XAheadFor(const GemvParams& p) {
  return p.m == 1 || int64_t{p.n} * p.k * 2 <= kXAheadMaxBytes;
}

template <int W, int U, bool kHi, Epilogue kEpi, bool kLink, XSource kSrc = XSource::kGlobal>
cudaError_t LaunchVariant(const GemvParams& p, const GemvRopeParams& r, GemvTuning tuning,
                          cudaStream_t stream) {
  // A SwiGLU tile holds 4 features of each half: ceil(inter / 4) = ceil(n / 8) tiles too; a RoPE
  // tile 4 pairs (8 features) or 8 v features: n / 8 tiles.
  const dim3 grid((p.n + kTileRows - 1) / kTileRows, (p.m + kGemvMaxRows - 1) / kGemvMaxRows);
  const bool evict_first = tuning.evict_first < 0
                               ? int64_t{p.n} * p.k * 2 <= GemvEvictFirstMaxBytes()
                               : tuning.evict_first != 0;
  const bool rope_early = kEpi == Epilogue::kRope && TcRopeReleasesEarly(p, r.head_dim);
  const auto launch = [&](auto x_ahead) {
    constexpr bool kX = decltype(x_ahead)::value;
    return evict_first
               ? LaunchKernelPdlIf(UsePdl(), GemvKernel<W, U, kHi, kEpi, true, kLink, kSrc, kX>,
                                   grid, dim3(W * 32), 0, stream, p, r, rope_early)
               : LaunchKernelPdlIf(UsePdl(),
                                   GemvKernel<W, U, kHi, kEpi, false, kLink, kSrc, kX>, grid,
                                   dim3(W * 32), 0, stream, p, r, rope_early);
  };
  if constexpr (kEpi == Epilogue::kStore && U == 8 && !kHi && kSrc == XSource::kGlobal) {
    if (XAheadFor(p)) return launch(std::true_type{});
  }
  return launch(std::false_type{});
}

template <int W, int U, bool kHi, Epilogue kEpi>
cudaError_t Launch(const GemvParams& p, const GemvRopeParams& r, GemvTuning tuning,
                   cudaStream_t stream) {
  // A rebuilt input row: one row (GemvSupported), so only the kernels without the upper half
  // have that variant; the RoPE epilogue only (the qkv projection after a fused MLP).
  if constexpr (!kHi && kEpi == Epilogue::kRope) {
    if (p.link.rebuild.on()) {
      return LaunchVariant<W, U, kHi, kEpi, true, XSource::kRebuilt>(p, r, tuning, stream);
    }
  }
  // An input row merged from attention's partitions: one row, the plain epilogue (the o
  // projection), with or without a norm link.
  if constexpr (!kHi && kEpi == Epilogue::kStore) {
    if (p.merged.on()) {
      return p.link.any()
                 ? LaunchVariant<W, U, kHi, kEpi, true, XSource::kMerged>(p, r, tuning, stream)
                 : LaunchVariant<W, U, kHi, kEpi, false, XSource::kMerged>(p, r, tuning, stream);
    }
  }
  if (p.link.any()) return LaunchVariant<W, U, kHi, kEpi, true>(p, r, tuning, stream);
  return LaunchVariant<W, U, kHi, kEpi, false>(p, r, tuning, stream);
}

template <int W, bool kHi, Epilogue kEpi>
cudaError_t LaunchW(const GemvParams& p, const GemvRopeParams& r, GemvTuning tuning,
                    cudaStream_t stream) {
  switch (tuning.unroll) {
    case 2: return Launch<W, 2, kHi, kEpi>(p, r, tuning, stream);
    case 4: return Launch<W, 4, kHi, kEpi>(p, r, tuning, stream);
    case 8: return Launch<W, 8, kHi, kEpi>(p, r, tuning, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <bool kHi, Epilogue kEpi>
cudaError_t LaunchHi(const GemvParams& p, const GemvRopeParams& r, GemvTuning tuning,
                     cudaStream_t stream) {
  switch (tuning.warps) {
    case 1: return LaunchW<1, kHi, kEpi>(p, r, tuning, stream);
    case 2: return LaunchW<2, kHi, kEpi>(p, r, tuning, stream);
    case 4: return LaunchW<4, kHi, kEpi>(p, r, tuning, stream);
    case 8: return LaunchW<8, kHi, kEpi>(p, r, tuning, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <Epilogue kEpi>
cudaError_t LaunchEpilogue(const GemvParams& p, const GemvRopeParams& r, GemvTuning tuning,
                           cudaStream_t stream) {
  if (tuning.rows) {
    return tuning.slab ? LaunchGemvSlab(p, r, RowsEpilogue(kEpi), UsePdl(), stream)
                       : LaunchGemvRows(p, r, RowsEpilogue(kEpi), UsePdl(), stream);
  }
  return p.m > 8 ? LaunchHi<true, kEpi>(p, r, tuning, stream)
                 : LaunchHi<false, kEpi>(p, r, tuning, stream);
}

}  // namespace

int64_t GemvEvictFirstMaxBytes() {
  static const int64_t bytes = [] {
    // At most 1 TiB: MB << 20 stays in int64 (a larger number wrapped negative).
    const long long mb = EnvIntIn("RTGEN_GEMV_EVICT_FIRST_MB", 0, int64_t{1} << 20, 16);
    return static_cast<int64_t>(mb) << 20;
  }();
  return bytes;
}

int64_t GemvRowsMinBytes() {
  static const int64_t bytes = [] {
    const long long mb = EnvIntIn("RTGEN_GEMV_ROWS_MIN_MB", 0, int64_t{1} << 20, 24);  // 0: never
    return mb > 0 ? static_cast<int64_t>(mb) << 20 : std::numeric_limits<int64_t>::max();
  }();
  return bytes;
}

bool GemvStreamsRows(const GemvParams& p) {
  // One input row of a large weight with many output features: streamed by rows (gemv_rows.h),
  // which reads 512 contiguous bytes per warp instruction. Under kRowsMinFeatures the rows kernel
  // has too few warps (one per two features) to keep the memory busy: Llama-3.2-1B's down
  // projection (2048 x 8192) measured 60 us per step slower in the decode graph.
  constexpr int kRowsMinFeatures = 4096;
  return p.m == 1 && p.n >= kRowsMinFeatures && int64_t{p.n} * p.k * 2 >= GemvRowsMinBytes();
}

bool GemvSupported(const GemvParams& p) {
  const GemvNormLink& l = p.link;
  const bool producer = l.has_producer();
  if (producer && !l.producer_complete()) return false;
  // A consumer zeroes a slot other than the ones this launch reads or adds to; alone (no
  // scale_by, no rebuilt row) only when zero_only says so.
  const GemvPendingRow& rb = l.rebuild;
  if (l.zero_after != nullptr &&
      ((l.scale_by == nullptr && !rb.on() && !l.zero_only) || l.zero_after == l.scale_by ||
       l.zero_after == l.sum_sq)) {
    return false;
  }
  if (l.zero_only && (l.zero_after == nullptr || l.scale_by != nullptr || rb.on())) return false;
  // Pending products: a producer's, or a consumer's rebuilt row of its three arrays (instead of
  // scale_by, at most kGemvMaxRebuildK long); neither on the row-streaming kernel.
  if (l.pending != nullptr && !producer) return false;
  if (rb.on() && (rb.residual == nullptr || rb.weight == nullptr || l.scale_by != nullptr ||
                  producer || p.k > kGemvMaxRebuildK)) {
    return false;
  }
  if ((l.pending != nullptr || rb.on()) && GemvStreamsRows(p)) return false;
  if ((l.pending != nullptr || rb.on()) && p.m != 1) return false;
  if ((producer || l.scale_by != nullptr || l.zero_after != nullptr) && p.m > kGemvMaxLinkRows) {
    return false;
  }
  // A merged input row: one row of num_heads * head_dim from complete partials, on the
  // tensor-core kernel (the row-streaming one does not form rows in shared memory); at least two
  // partitions (with one, attention writes its output directly and leaves no partials).
  const GemvMergedInput& mi = p.merged;
  if (mi.on() &&
      (p.m != 1 || rb.on() || mi.partial_ml == nullptr || mi.context_lens == nullptr ||
       mi.num_splits < 2 || mi.partition_size <= 0 || mi.num_heads <= 0 ||
       mi.head_dim <= 0 || mi.head_dim % 8 != 0 || int64_t{mi.num_heads} * mi.head_dim != p.k ||
       p.k > kGemvMaxRebuildK || !Aligned16(mi.partial_out) || !Aligned16(mi.partial_ml) ||
       GemvStreamsRows(p))) {
    return false;
  }
  return p.m >= 1 && p.m <= kGemvMaxSlicedRows && p.k > 0 && p.k % 8 == 0 && p.n > 0 &&
         Aligned16(p.x) && Aligned16(p.w);
}

GemvTuning GemvDefaultTuning(const GemvParams& p) {
  // From rtgen-gemv-bench --sweep on the H200 (docs/perf/gpu_notes.md, 2026-11-30 GEMV section).
  // Registers allow ~16 resident warps per SM at unroll 8 (~24 at 4, ~32 at 2); the best launch
  // puts all ceil(n / 8) tiles in one wave with as many warps per tile as fit, and the unroll that
  // needs the fewest rounds of groups per warp (the smaller on a tie). More tiles than one wave
  // holds: 2 warps per tile. Batch rows 8..15 cost registers: unroll 2 for long rows then.
  constexpr int kSms = 132;
  const int slices = (p.m + kGemvMaxRows - 1) / kGemvMaxRows;  // grid rows
  const int tiles = (p.n + kTileRows - 1) / kTileRows * slices;
  const int chunks = p.k / 8;
  const bool hi = p.m > 8;
  const auto resident_warps = [](int unroll) {
    return kSms * (unroll == 8 ? 16 : unroll == 4 ? 24 : 32);
  };
  const auto best_unroll = [&](int warps) {
    if (hi && chunks >= 256) return 2;
    int best = 2, best_rounds = 1 << 30;
    for (int u : {2, 4, 8}) {
      const int groups = (chunks + 4 * u - 1) / (4 * u);
      const int rounds = (groups + warps - 1) / warps;
      if (rounds < best_rounds) best = u, best_rounds = rounds;
    }
    return best;
  };
  GemvTuning tuning{2, hi || chunks < 256 ? 2 : 8};
  for (int warps : {8, 4, 2, 1}) {
    const int unroll = best_unroll(warps);
    if (tiles * warps <= resident_warps(unroll)) {
      tuning = {warps, unroll};
      break;
    }
  }
  tuning.rows = GemvStreamsRows(p);
  tuning.slab = tuning.rows && GemvSlabByDefault(p);
  return tuning;
}

cudaError_t GemvTuned(GemvParams p, GemvTuning tuning, cudaStream_t stream) {
  if (!GemvSupported(p) || !TuningFits(p, {}, tuning, Epilogue::kStore)) {
    return cudaErrorInvalidValue;
  }
  return LaunchEpilogue<Epilogue::kStore>(p, {}, tuning, stream);
}

bool GemvSiluMulSupported(const GemvParams& p) {
  return GemvSupported(p) && p.n % 2 == 0 && !p.y_f32;
}

cudaError_t GemvSiluMulTuned(GemvParams p, GemvTuning tuning, cudaStream_t stream) {
  if (!GemvSiluMulSupported(p) || !TuningFits(p, {}, tuning, Epilogue::kSwiGlu)) {
    return cudaErrorInvalidValue;
  }
  return LaunchEpilogue<Epilogue::kSwiGlu>(p, {}, tuning, stream);
}

cudaError_t GemvSiluMul(GemvParams p, cudaStream_t stream) {
  return GemvSiluMulTuned(p, DefaultTuningFor(p, {}, Epilogue::kSwiGlu), stream);
}

bool GemvRopeKvStoreSupported(const GemvParams& p, const GemvRopeParams& r) {
  return GemvSupported(p) && !p.y_f32 && r.head_dim > 0 && r.head_dim % 8 == 0 &&
         r.head_dim <= 256 && r.num_heads > 0 && r.num_kv_heads > 0 &&
         p.n == (r.num_heads + 2 * r.num_kv_heads) * r.head_dim && r.positions != nullptr &&
         r.inv_freq != nullptr && r.slot_mapping != nullptr && r.k_cache != nullptr &&
         r.v_cache != nullptr;
}

cudaError_t GemvRopeKvStoreTuned(GemvParams p, GemvRopeParams r, GemvTuning tuning,
                                 cudaStream_t stream) {
  if (!GemvRopeKvStoreSupported(p, r) || !TuningFits(p, r, tuning, Epilogue::kRope)) {
    return cudaErrorInvalidValue;
  }
  return LaunchEpilogue<Epilogue::kRope>(p, r, tuning, stream);
}

bool GemvRopeReleasesEarly(const GemvParams& p, int32_t head_dim) {
  return GemvDefaultTuning(p).rows ? GemvRowsRopeEarlyDependents()
                                   : TcRopeReleasesEarly(p, head_dim);
}

cudaError_t GemvRopeKvStore(GemvParams p, GemvRopeParams r, cudaStream_t stream) {
  return GemvRopeKvStoreTuned(p, r, DefaultTuningFor(p, r, Epilogue::kRope), stream);
}

cudaError_t Gemv(GemvParams p, cudaStream_t stream) {
  return GemvTuned(p, DefaultTuningFor(p, {}, Epilogue::kStore), stream);
}

}  // namespace rtgen::kernels
