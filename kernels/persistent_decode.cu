// The batch-1 decode step as one persistent kernel (see persistent_decode.h).
//
// Phases of a layer, each followed by a grid barrier:
//   P1 QKV rows. RoPE pairs (row i, row i + head_dim/2 of a head) end in the same warp, so the
//      epilogue rotates q and k there and stores the new token's k and v in the paged cache.
//   P2 one warp per (q head, key chunk of 16 × n keys): online-softmax attention over the
//      chunk's keys; partial (base-2 max, sum, output) to the workspace.
//   P3 every block merges the partials (chunk order) into the attention row, then O-proj rows,
//      each added to the residual by the one lane that owns it.
//   P4 gate_up rows in (gate f, up f) pairs, SiLU·mul → act (bf16).
//   P5 down-proj rows added to the residual.
// After the last layer: the LM head rows (fp32 logits).
//
// Latency, not bytes, bounds the small models, so every phase keeps one memory round trip on
// its critical path where it can: a GEMV warp issues its first weight loads (and the residual
// value it will add to) before the block builds the input vector in shared memory (RMSNorm of
// the residual, the attention merge, or the act row: the "prologue"); attention issues the
// block-table-resolved K and V loads of a pass and its q loads together (the block table is
// copied to shared memory at kernel start). Each warp's own instruction chain is latency too,
// so work is cut thin: one GEMV row per warp where there are warps for it, 16 keys of one q
// head per attention pass.
//
// GEMV rows are spread over all warps of the grid, consecutive row groups on different SMs
// (warp slot = warp * gridDim.x + block). A warp keeps up to 16 16-byte weight loads per lane in
// flight, then reduces with shuffles.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device_utils.cuh"
#include "kernels/rope_math.cuh"
#include "kernels/persistent_decode.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHidden = 8192;
constexpr int kTableCache = 1024;                // block-table entries kept in shared memory

__device__ __forceinline__ float Dot8(uint4 w, uint4 x, float acc) {
  float a[8], b[8];
  UnpackBf16x8(w, a);
  UnpackBf16x8(x, b);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(a[i], b[i], acc);
  return acc;
}

// Grid-wide barrier over a counter that only grows during a launch: the n-th barrier waits for
// n * gridDim.x arrivals. Thread 0 of each block arrives and spins (acquire); the block's other
// threads are ordered by the surrounding __syncthreads.
struct GridBarrier {
  uint32_t* counter;
  uint32_t target;

  __device__ void Sync() {
    __syncthreads();
    target += gridDim.x;
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(counter, 1u);
      uint32_t seen;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      } while (seen < target);
    }
    __syncthreads();
  }

  // Leaves the counters zero for the next launch: the last block to get here has seen every
  // block pass its final spin (counter[1] counts blocks done).
  __device__ void Finish() {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(counter + 1, 1u) == gridDim.x - 1) {
        counter[0] = 0;
        counter[1] = 0;
        __threadfence();
      }
    }
  }
};

// Shared memory: x (bf16 GEMV input), block-sum scratch, f32 residual staging, RoPE table,
// merge weights, block table.
struct SharedLayout {
  int x_elems, xf_offset, cs_offset, merge_offset, table_offset, total;
  __host__ __device__ SharedLayout(int hidden, int q_dim, int inter, int num_heads, int head_dim) {
    int x = hidden > q_dim ? hidden : q_dim;
    x = x > inter ? x : inter;
    x_elems = (x + 7) / 8 * 8;
    xf_offset = x_elems * 2 + 32 * 4;  // after x and 32 floats of scratch
    cs_offset = xf_offset + x_elems * 4;
    merge_offset = cs_offset + head_dim * 4;
    table_offset = merge_offset + 2 * num_heads * kPersistentMaxChunks * 4;
    total = table_offset + kTableCache * 4;
  }
};

struct Shared {
  __nv_bfloat16* x;
  float* scratch;
  float* xf;       // f32 staging of the residual [hidden]
  float* cs;       // cos [head_dim / 2], then sin
  float* merge;    // [2, num_heads, kPersistentMaxChunks]: chunk maxima (then weights), sums
  int32_t* table;  // block table row 0 (first kTableCache entries)
};

// The step's key layout, read once per launch.
struct Keys {
  int ctx;       // keys (context_lens[0]); 0: the attention row is zeros
  int spc;       // 16-key passes per chunk
  int nchunks;   // chunks per q head
  int64_t new_row;  // element offset of the new token's cache row (slot * kv_dim), -1: none
};

// x = bf16(residual * rsqrt(mean(residual^2) + eps) * weight), computed by every block (the
// residual is staged in xf; each thread re-reads only what it wrote).
__device__ void NormToShared(const float* residual, const float* weight, int hidden, float eps,
                             const Shared& sh) {
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = __ldcg(residual + i);
    sh.xf[i] = v;
    sum_sq += v * v;
  }
  sum_sq = BlockSum(sum_sq, sh.scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    sh.x[i] = __float2bfloat16(sh.xf[i] * inv_rms * weight[i]);
  }
  __syncthreads();
}

// x = a bf16 vector of n elements (n % 8 == 0) written earlier in this launch.
__device__ void CopyToShared(const __nv_bfloat16* src, int n, const Shared& sh) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(sh.x);
  for (int c = threadIdx.x; c < n / 8; c += kThreads) d[c] = __ldcg(s + c);
  __syncthreads();
}

// x = the attention row: per q head, the chunk partials merged in chunk order (weights
// exp2(m_c - max) / sum first, then the weighted outputs), rounded to bf16.
__device__ void MergeToShared(const PersistentDecodeParams& p, const Keys& keys,
                              const Shared& sh) {
  const int hd = p.head_dim, n = keys.nchunks;
  float* m = sh.merge;                                       // [num_heads, kMaxChunks]
  float* l = sh.merge + p.num_heads * kPersistentMaxChunks;  // same
  for (int e = threadIdx.x; e < p.num_heads * n; e += kThreads) {
    const int h = e / n, c = e % n, part = h * kPersistentMaxChunks + c;
    m[part] = __ldcg(p.part_ml + 2 * part);
    l[part] = __ldcg(p.part_ml + 2 * part + 1);
  }
  __syncthreads();
  if (threadIdx.x < p.num_heads) {  // m becomes the chunk weights exp2(m_c - max) / sum
    float* w = m + threadIdx.x * kPersistentMaxChunks;
    const float* lc = l + threadIdx.x * kPersistentMaxChunks;
    float mx = -INFINITY, sum = 0.0f;
    for (int c = 0; c < n; ++c) mx = fmaxf(mx, w[c]);
    for (int c = 0; c < n; ++c) {
      w[c] = exp2f(w[c] - mx);
      sum = fmaf(w[c], lc[c], sum);
    }
    for (int c = 0; c < n; ++c) w[c] /= sum;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.num_heads * hd; e += kThreads) {
    const int h = e / hd, d = e % hd;
    const float* acc = p.part_acc + static_cast<int64_t>(h) * kPersistentMaxChunks * hd + d;
    float v[kPersistentMaxChunks];
#pragma unroll
    for (int c = 0; c < kPersistentMaxChunks; ++c) v[c] = c < n ? __ldcg(acc + c * hd) : 0.0f;
    float out = 0.0f;
#pragma unroll
    for (int c = 0; c < kPersistentMaxChunks; ++c) {
      if (c < n) out = fmaf(m[h * kPersistentMaxChunks + c], v[c], out);
    }
    sh.x[e] = __float2bfloat16(out);
  }
  __syncthreads();
}

// Warp-level GEMV over groups of G weight rows. row_of(group, g): row g of a group (always a
// valid row); pre(group): a value the epilogue needs, loaded with the weights (e.g. the
// residual entry lane g adds to); prologue(): block-wide, fills x (called once by every thread,
// after the warp's first weight loads are in flight); epi(group, acc, pre value): the G dot
// products with x (every lane holds all of them).
template <int U, int G, typename RowOf, typename Pre, typename Prologue, typename Epi>
__device__ __forceinline__ void RunGemv(const __nv_bfloat16* w, int k, int num_groups,
                                        const Shared& sh, RowOf row_of, Pre pre,
                                        Prologue prologue, Epi epi) {
  const int lane = threadIdx.x & 31;
  const int num_slots = kWarps * gridDim.x;
  const int chunks = k >> 3;
  const uint4* xs = reinterpret_cast<const uint4*>(sh.x);
  const uint4* rows[G];
  uint4 wv[G][U];
  float extra = 0.0f;
  auto start_group = [&](int gi) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      rows[g] = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(row_of(gi, g)) * k);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = u * 32 + lane;
#pragma unroll
      for (int g = 0; g < G; ++g) wv[g][u] = LoadStreamed16(rows[g] + c, c < chunks);
    }
    extra = pre(gi);
  };
  int gi = (threadIdx.x >> 5) * gridDim.x + blockIdx.x;
  if (gi < num_groups) start_group(gi);
  prologue();
  for (; gi < num_groups; gi += num_slots) {
    float acc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = 0.0f;
    for (int base = 0;;) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = base + u * 32 + lane;
        if (c < chunks) {
          const uint4 xv = xs[c];
#pragma unroll
          for (int g = 0; g < G; ++g) acc[g] = Dot8(wv[g][u], xv, acc[g]);
        }
      }
      base += 32 * U;
      if (base >= chunks) break;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = base + u * 32 + lane;
#pragma unroll
        for (int g = 0; g < G; ++g) wv[g][u] = LoadStreamed16(rows[g] + c, c < chunks);
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = WarpSum(acc[g]);
    epi(gi, acc, extra);
    if (gi + num_slots < num_groups) start_group(gi + num_slots);
  }
}

// Runs body(U, G) with the group shape of a GEMV over `rows` rows of k elements. A warp's
// instructions are its latency, so rows are spread one per warp while there are warps for them
// (rows ≤ 2 × warp slots); wider phases (the LM head, the big models) take several rows per
// warp to keep 16 loads per lane in flight. U (16-byte loads per lane per row) covers a row of
// ≤ 4 / 8 chunks per lane in one go, else 16 per step. kPairs: groups of 2 rows (RoPE pairs,
// gate/up pairs).
template <bool kPairs, typename Body>
__device__ __forceinline__ void WithGroupShape(int k, int rows, Body body) {
  const int cpl = (k / 8 + 31) / 32;
  const bool wide = rows > 2 * kWarps * static_cast<int>(gridDim.x);
  if constexpr (kPairs) {
    if (cpl <= 4) {
      body(std::integral_constant<int, 4>(), std::integral_constant<int, 2>());
    } else {
      body(std::integral_constant<int, 8>(), std::integral_constant<int, 2>());
    }
  } else {
    if (cpl <= 4) {
      if (wide) {
        body(std::integral_constant<int, 4>(), std::integral_constant<int, 4>());
      } else {
        body(std::integral_constant<int, 4>(), std::integral_constant<int, 1>());
      }
    } else if (cpl <= 8) {
      if (wide) {
        body(std::integral_constant<int, 8>(), std::integral_constant<int, 2>());
      } else {
        body(std::integral_constant<int, 8>(), std::integral_constant<int, 1>());
      }
    } else {
      body(std::integral_constant<int, 16>(), std::integral_constant<int, 1>());
    }
  }
}

// y = W x for rows [0, rows); residual != null: residual[row] += bf16(y) (the lane owning a row
// loads its old value with the weights), else out_bf16[row] = bf16(y) or out_f32[row] = y.
template <typename Prologue>
__device__ void RowsGemv(const __nv_bfloat16* w, int rows, int k, const Shared& sh,
                         Prologue prologue, float* residual, __nv_bfloat16* out_bf16,
                         float* out_f32) {
  const int lane = threadIdx.x & 31;
  WithGroupShape<false>(k, rows, [&](auto u_tag, auto g_tag) {
    constexpr int U = decltype(u_tag)::value, G = decltype(g_tag)::value;
    auto row_of = [&](int gi, int g) { return min(gi * G + g, rows - 1); };
    RunGemv<U, G>(
        w, k, (rows + G - 1) / G, sh, row_of,
        [&](int gi) {
          return residual != nullptr && lane < G ? __ldcg(residual + row_of(gi, lane)) : 0.0f;
        },
        prologue,
        [&](int gi, const float(&acc)[G], float old) {
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const int row = gi * G + g;
            if (lane != g || row >= rows) continue;
            if (residual != nullptr) {
              __stcg(residual + row, old + RoundBf16(acc[g]));
            } else if (out_bf16 != nullptr) {
              out_bf16[row] = __float2bfloat16(acc[g]);
            } else {
              out_f32[row] = acc[g];
            }
          }
        });
  });
}

// P1: qkv = Wqkv x, RoPE on q and k (as RopeKvStore: bf16 inputs, fp32 rotation, bf16 out), the
// new token's k and v into the paged cache. Groups [0, rope_groups) hold F = G/2 rotation pairs
// (rows i of the pairs, then rows i + half), the rest G v rows each.
template <int HD, typename Prologue>
__device__ void QkvGemv(const PersistentDecodeParams& p, const __nv_bfloat16* wqkv,
                        const Keys& keys,
                        __nv_bfloat16* k_cache, __nv_bfloat16* v_cache, const Shared& sh,
                        Prologue prologue) {
  constexpr int kHalf = HD / 2;
  const int lane = threadIdx.x & 31;
  const int q_dim = p.num_heads * HD, kv_dim = p.num_kv_heads * HD;
  WithGroupShape<true>(p.hidden, q_dim + 2 * kv_dim, [&](auto u_tag, auto g_tag) {
    constexpr int U = decltype(u_tag)::value, G = decltype(g_tag)::value, F = G / 2;
    const int rope_groups = (q_dim + kv_dim) / 2 / F;
    const int v_groups = kv_dim / G;
    auto row_of = [&](int gi, int g) {
      if (gi >= rope_groups) return q_dim + kv_dim + (gi - rope_groups) * G + g;
      const int pair = gi * F + (g < F ? g : g - F);
      return (pair / kHalf) * HD + pair % kHalf + (g < F ? 0 : kHalf);
    };
    RunGemv<U, G>(
        wqkv, p.hidden, rope_groups + v_groups, sh, row_of,
        [](int) { return 0.0f; }, prologue,
        [&](int gi, const float(&acc)[G], float) {
          if (gi < rope_groups) {
#pragma unroll
            for (int j = 0; j < F; ++j) {
              if (lane != j) continue;
              const int pair = gi * F + j, head = pair / kHalf, i = pair % kHalf;
              const RotatedPair rot = RotateHalf(RoundBf16(acc[j]), RoundBf16(acc[F + j]),
                                                 sh.cs[i], sh.cs[kHalf + i]);
              const int row = head * HD + i;
              p.qkv[row] = rot.lo;
              p.qkv[row + kHalf] = rot.hi;
              if (head >= p.num_heads && keys.new_row >= 0) {
                __nv_bfloat16* kc = k_cache + keys.new_row + (head - p.num_heads) * HD;
                kc[i] = rot.lo;
                kc[i + kHalf] = rot.hi;
              }
            }
          } else {
#pragma unroll
            for (int g = 0; g < G; ++g) {
              if (lane != g) continue;
              const int row = row_of(gi, g);
              const __nv_bfloat16 v = __float2bfloat16(acc[g]);
              p.qkv[row] = v;
              if (keys.new_row >= 0) v_cache[keys.new_row + (row - q_dim - kv_dim)] = v;
            }
          }
        });
  });
}

// P4: act[f] = silu(gate f) * up f with the gate_up weight [gate; up] (2 * inter rows), rows
// taken in (gate, up) pairs so both dot products end in the same warp; the rounding of gate and
// up to bf16 and the SiLU arithmetic are SiluMul's.
template <typename Prologue>
__device__ void SwigluGemv(const __nv_bfloat16* w, int inter, int k, const Shared& sh,
                           Prologue prologue, __nv_bfloat16* act) {
  const int lane = threadIdx.x & 31;
  WithGroupShape<true>(k, 2 * inter, [&](auto u_tag, auto g_tag) {
    constexpr int U = decltype(u_tag)::value, G = decltype(g_tag)::value, F = G / 2;
    RunGemv<U, G>(
        w, k, inter / F, sh,
        [&](int gi, int g) { return g < F ? gi * F + g : inter + gi * F + (g - F); },
        [](int) { return 0.0f; }, prologue,
        [&](int gi, const float(&acc)[G], float) {
#pragma unroll
          for (int f = 0; f < F; ++f) {
            if (lane != f) continue;
            const float gate = RoundBf16(acc[f]), up = RoundBf16(acc[F + f]);
            act[gi * F + f] = SiluTimes(gate, up);
          }
        });
  });
}

// P2 (see the file comment): one warp per (q head, key chunk). A pass covers 16 keys, two
// lanes per key (each half of the head's dims, q in registers); the lanes then own head_dim/32
// output dims each and accumulate the 16 V rows. Online softmax across a chunk's passes.
template <int HD>
__device__ void AttentionPhase(const PersistentDecodeParams& p, const Keys& keys,
                               const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                               const Shared& sh) {
  constexpr int kDpl = HD / 32;           // output dims per lane
  constexpr int kHalfChunks = HD / 16;    // 16-byte chunks in half a head row
  using VRaw = std::conditional_t<kDpl == 2, uint32_t, uint2>;
  const int lane = threadIdx.x & 31;
  const int slot = (threadIdx.x >> 5) * gridDim.x + blockIdx.x;
  const int num_slots = kWarps * gridDim.x;
  const int gq = p.num_heads / p.num_kv_heads;
  const int kv_dim = p.num_kv_heads * HD;
  const float q_scale = p.scale * kLog2e;  // scores in base 2
  const bool table_cached = (keys.ctx + p.block_size - 1) / p.block_size <= kTableCache;
  const int half = lane & 1;               // which half of the head dims this lane scores
  for (int item = slot; item < p.num_heads * keys.nchunks; item += num_slots) {
    const int h = item / keys.nchunks, c = item % keys.nchunks, g = h / gq;
    float m = -INFINITY, l = 0.0f, acc[kDpl];
#pragma unroll
    for (int d = 0; d < kDpl; ++d) acc[d] = 0.0f;
    float q[HD / 2];
    for (int s = 0; s < keys.spc; ++s) {
      const int t0 = (c * keys.spc + s) * 16;
      if (t0 >= keys.ctx) break;
      const int t = t0 + (lane >> 1);
      const bool valid = t < keys.ctx;
      int64_t row = 0;  // element offset of key t's (slot, kv head g) row
      if (valid) {
        const int j = t / p.block_size;
        const int block = table_cached ? sh.table[j] : p.block_table[j];
        row = (static_cast<int64_t>(block) * p.block_size + t % p.block_size) * kv_dim + g * HD;
      }
      const int nk = min(16, keys.ctx - t0);
      uint4 kr[kHalfChunks];
      const uint4* kp = reinterpret_cast<const uint4*>(k_cache + row) + half * kHalfChunks;
#pragma unroll
      for (int j = 0; j < kHalfChunks; ++j) {
        kr[j] = valid ? __ldcg(kp + j) : make_uint4(0, 0, 0, 0);
      }
      VRaw vr[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int64_t vrow = __shfl_sync(kFullMask, row, 2 * j);
        vr[j] = j < nk ? __ldcg(reinterpret_cast<const VRaw*>(v_cache + vrow + lane * kDpl))
                       : VRaw{};
      }
      if (s == 0) {  // this lane's half of q (rotated in P1), scaled
        const uint4* qp = reinterpret_cast<const uint4*>(p.qkv + h * HD) + half * kHalfChunks;
#pragma unroll
        for (int j = 0; j < kHalfChunks; ++j) {
          float f[8];
          UnpackBf16x8(__ldcg(qp + j), f);
#pragma unroll
          for (int e = 0; e < 8; ++e) q[j * 8 + e] = f[e] * q_scale;
        }
      }
      float score = 0.0f;
#pragma unroll
      for (int j = 0; j < kHalfChunks; ++j) {
        float kf[8];
        UnpackBf16x8(kr[j], kf);
#pragma unroll
        for (int e = 0; e < 8; ++e) score = fmaf(q[j * 8 + e], kf[e], score);
      }
      score += __shfl_xor_sync(kFullMask, score, 1);  // both lanes of a key hold its score
      const float m_new = fmaxf(m, WarpMax(valid ? score : -INFINITY));
      const float corr = exp2f(m - m_new);
      const float pr = valid ? exp2f(score - m_new) : 0.0f;
      l = l * corr + WarpSum(half == 0 ? pr : 0.0f);
#pragma unroll
      for (int d = 0; d < kDpl; ++d) acc[d] *= corr;
      m = m_new;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float pj = __shfl_sync(kFullMask, pr, 2 * j);  // 0 for keys past the context
        float vf[kDpl];
        if constexpr (kDpl == 2) {
          const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vr[j]));
          vf[0] = f.x;
          vf[1] = f.y;
        } else {
          const float2 f0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vr[j].x));
          const float2 f1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vr[j].y));
          vf[0] = f0.x;
          vf[1] = f0.y;
          vf[2] = f1.x;
          vf[3] = f1.y;
        }
#pragma unroll
        for (int d = 0; d < kDpl; ++d) acc[d] = fmaf(pj, vf[d], acc[d]);
      }
    }
    const int part = h * kPersistentMaxChunks + c;
    if (lane == 0) {
      __stcg(p.part_ml + 2 * part, m);
      __stcg(p.part_ml + 2 * part + 1, l);
    }
#pragma unroll
    for (int d = 0; d < kDpl; ++d) __stcg(p.part_acc + part * HD + lane * kDpl + d, acc[d]);
  }
}

template <int HD>
__global__ void __launch_bounds__(kThreads, 1) PersistentDecodeKernel(PersistentDecodeParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int q_dim = p.num_heads * HD, kv_dim = p.num_kv_heads * HD;
  const SharedLayout layout(p.hidden, q_dim, p.inter, p.num_heads, HD);
  const Shared sh{reinterpret_cast<__nv_bfloat16*>(smem),
                  reinterpret_cast<float*>(smem + layout.x_elems * 2),
                  reinterpret_cast<float*>(smem + layout.xf_offset),
                  reinterpret_cast<float*>(smem + layout.cs_offset),
                  reinterpret_cast<float*>(smem + layout.merge_offset),
                  reinterpret_cast<int32_t*>(smem + layout.table_offset)};
  GridBarrier grid{p.barrier, 0};

  // Step constants: key layout, RoPE angles (as RopeKvStore: fp64, then fp32), block table.
  Keys keys;
  keys.ctx = max(p.context_lens[0], 0);
  const int n16 = (keys.ctx + 15) / 16;
  keys.spc = max(1, (n16 + kPersistentMaxChunks - 1) / kPersistentMaxChunks);
  keys.nchunks = (n16 + keys.spc - 1) / keys.spc;
  const int32_t slot = p.slot_mapping[0];
  keys.new_row = slot >= 0 ? static_cast<int64_t>(slot) * kv_dim : -1;
  for (int i = threadIdx.x; i < HD / 2; i += kThreads) {
    RopeCosSin(p.positions[0], p.inv_freq[i], &sh.cs[i], &sh.cs[HD / 2 + i]);
  }
  const int table_len = min((keys.ctx + p.block_size - 1) / p.block_size, kTableCache);
  for (int j = threadIdx.x; j < table_len; j += kThreads) sh.table[j] = p.block_table[j];
  __syncthreads();

  for (int layer = 0; layer < p.num_layers; ++layer) {
    const PersistentLayer& w = p.layers[layer];
    __nv_bfloat16* k_cache = p.k_cache + layer * p.layer_elems;
    __nv_bfloat16* v_cache = p.v_cache + layer * p.layer_elems;
    // P1: RMSNorm (prologue) + QKV + RoPE + KV store.
    QkvGemv<HD>(p, w.wqkv, keys, k_cache, v_cache, sh,
                [&] { NormToShared(p.residual, w.attn_norm, p.hidden, p.eps, sh); });
    grid.Sync();
    // P2: attention partials.
    AttentionPhase<HD>(p, keys, k_cache, v_cache, sh);
    grid.Sync();
    // P3: merge (prologue) + O-proj + residual.
    RowsGemv(w.wo, p.hidden, q_dim, sh, [&] { MergeToShared(p, keys, sh); }, p.residual, nullptr,
             nullptr);
    grid.Sync();
    // P4: RMSNorm (prologue) + gate_up + SiLU·mul.
    SwigluGemv(w.w_gate_up, p.inter, p.hidden, sh,
               [&] { NormToShared(p.residual, w.ffn_norm, p.hidden, p.eps, sh); }, p.act);
    grid.Sync();
    // P5: act (prologue) + down-proj + residual.
    RowsGemv(w.w_down, p.hidden, p.inter, sh, [&] { CopyToShared(p.act, p.inter, sh); },
             p.residual, nullptr, nullptr);
    grid.Sync();
  }
  // Final RMSNorm (prologue) + LM head.
  RowsGemv(p.lm_head, p.vocab, p.hidden, sh,
           [&] { NormToShared(p.residual, p.final_norm, p.hidden, p.eps, sh); }, nullptr, nullptr,
           p.logits);
  grid.Finish();
}

template <int HD>
PersistentLaunch Configure(const PersistentDecodeParams& p, int device) {
  PersistentLaunch launch;
  const SharedLayout layout(p.hidden, p.num_heads * HD, p.inter, p.num_heads, HD);
  int num_sms = 0, per_sm = 0, max_smem = 0;
  if (cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess ||
      layout.total > max_smem ||
      cudaFuncSetAttribute(PersistentDecodeKernel<HD>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, layout.total) !=
          cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PersistentDecodeKernel<HD>,
                                                    kThreads, layout.total) != cudaSuccess ||
      per_sm < 1) {
    cudaGetLastError();  // clear a failed query: the caller falls back to the layered path
    return launch;
  }
  launch.grid = num_sms;  // one block per SM: more would only add barrier arrivals
  launch.threads = kThreads;
  launch.smem_bytes = layout.total;
  return launch;
}

}  // namespace

PersistentLaunch ConfigurePersistentDecode(const PersistentDecodeParams& p, int device) {
  const bool shapes_ok =
      p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
      p.hidden > 0 && p.hidden <= kMaxHidden &&
      p.hidden % 8 == 0 && p.inter > 0 && p.inter % 8 == 0 && p.vocab > 0 && p.block_size > 0;
  if (!shapes_ok) return {};
  if (p.head_dim == 64) return Configure<64>(p, device);
  if (p.head_dim == 128) return Configure<128>(p, device);
  return {};
}

cudaError_t PersistentDecode(const PersistentDecodeParams& p, const PersistentLaunch& launch,
                             cudaStream_t stream) {
  if (launch.grid <= 0) return cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(launch.grid);
  cfg.blockDim = dim3(launch.threads);
  cfg.dynamicSmemBytes = launch.smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // all blocks co-resident, or the launch fails
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (p.head_dim == 64) return cudaLaunchKernelEx(&cfg, PersistentDecodeKernel<64>, p);
  if (p.head_dim == 128) return cudaLaunchKernelEx(&cfg, PersistentDecodeKernel<128>, p);
  return cudaErrorInvalidValue;
}

}  // namespace rtgen::kernels
