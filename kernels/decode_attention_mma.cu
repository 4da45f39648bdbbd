#include "kernels/decode_attention_mma.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "kernels/decode_partitions.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/mma.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kRows = 16;  // query heads per block: the mma's M (zero rows past the group)
constexpr int kPad = 8;    // floats after each merge row (MergeBuffers)

// kWarps warps per block; a tile holds 16 keys per warp (warp w scores keys [16 w, 16 w + 16));
// kStages tiles in flight (LaunchFitting picks). Rows are kD elements, swizzled (Swz): ldmatrix's
// eight rows of one 16-byte column fall in eight different bank groups without padding.
template <int kD, int kWarps, int kStages>
struct TileBuffers {
  static_assert(kD == 64 || kD == 128, "Swz needs rows of 8 or 16 chunks");
  static constexpr int kTileKeys = 16 * kWarps;
  __nv_bfloat16 q[kRows][kD];
  __nv_bfloat16 k[kStages][kTileKeys][kD];
  __nv_bfloat16 v[kStages][kTileKeys][kD];
};

// Per-warp outputs for the final merge, in the K and V tiles' space (free by then). Rows of
// kD + kPad floats: a warp stores its fragment as float2 pairs (row g, columns 8 n + 2 t), and
// with rows 72 or 136 floats apart each half-warp's 16 pairs fall in 32 different banks (with rows
// kD apart the eight g shared a bank: 8-way conflicts, ~1 us of a batch-1 block's merge on the
// H200).
template <int kD, int kWarps>
struct MergeBuffers {
  float o[kWarps][kRows][kD + kPad];
};

// grid (num_kv_heads, num_seqs, num_splits), 32 * kWarps threads,
// sizeof(TileBuffers<kD, kWarps, kStages>) bytes of dynamic shared memory. kPrefetch:
// p.prefetch_kv; kRope: p.rope.on() (never with kPrefetch): q rotated as it is loaded, and the
// newest key rotated, stored to the caches and put in its tile's row by this kernel.
template <int kD, int kWarps, int kStages, bool kPrefetch, bool kRope>
__global__ void __launch_bounds__(32 * kWarps, kWarps <= 12 ? 12 / kWarps : 1)
    DecodeAttentionMmaKernel(DecodeAttentionParams p) {
  RTGEN_TRACE_KERNEL(kDecodeAttentionMma);
  static_assert(!(kPrefetch && kRope));
  using Stages = TileBuffers<kD, kWarps, kStages>;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kTileKeys = Stages::kTileKeys;
  constexpr int kChunks = kD / 8;  // 16-byte pieces per row
  static_assert(sizeof(MergeBuffers<kD, kWarps>) <= sizeof(Stages::k) + sizeof(Stages::v) &&
                offsetof(Stages, v) == offsetof(Stages, k) + sizeof(Stages::k));
  extern __shared__ __align__(16) unsigned char s_raw[];
  Stages& sm = *reinterpret_cast<Stages*>(s_raw);
  __shared__ int32_t s_table[kPartitionTableCache];
  __shared__ float s_m[kWarps][kRows], s_l[kWarps][kRows];

  const int kv_head = blockIdx.x, seq = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  constexpr int kHalf = kD / 2, kUnits = kD / 8;  // kRope: 4-pair units of a row
  // kRope: the angles' cos (index i < kHalf) and sin (kHalf + i) of pair i (one float in the
  // other variants).
  __shared__ __align__(16) float s_angle[kRope ? kD : 1];
  const auto angle = [&](int i) { return &s_angle[i]; };
  // kRope: the newest key's cache slot (-1: not stored, and the key read from the cache as the
  // others, as RopeKvStore does).
  [[maybe_unused]] int32_t rope_slot = -1;
  if constexpr (kRope) {  // step arrays and the frequencies: before the wait (LoadPartition syncs)
    const int32_t pos = p.rope.positions[seq];
    rope_slot = p.rope.slot_mapping[seq];
    for (int i = threadIdx.x; i < kHalf; i += kThreads) {
      RopeCosSin(pos, p.rope.inv_freq[i], angle(i), angle(kHalf + i));
    }
  }
  // Before the PDL wait (step arrays, written by no kernel): the context length and this
  // partition's block-table entries, so slots resolve from shared memory.
  PartitionRange range;
  PartitionRole role;
  if constexpr (kPrefetch) {
    range = LoadPartition<kThreads>(p, seq, split, s_table);
    role = RoleOf(p, range, split);
  } else {
    role = EnterPartition<kThreads>(p, seq, split, s_table, &range);
    if (role.skip) return;
  }
  const int begin = range.begin, end = range.end;

  const int group = p.num_heads / p.num_kv_heads;
  const int head0 = kv_head * group;
  const int row = p.num_kv_heads * kD;  // elements per cache slot
  const __nv_bfloat16* kbase = p.k_cache + static_cast<int64_t>(kv_head) * kD;
  const __nv_bfloat16* vbase = p.v_cache + static_cast<int64_t>(kv_head) * kD;
  const int tiles = end > begin ? (end - begin + kTileKeys - 1) / kTileKeys : 0;

  // Copies row r of tile `tile` (its key's K and V, zeros past the context) into stage
  // tile % kStages, in 16-byte pieces: piece ch of the row.
  const auto copy_piece = [&](int tile, int r, int ch) {
    const int st = tile % kStages;
    const int key = begin + tile * kTileKeys + r;
    const bool valid = key < end;
    const int64_t at = valid ? range.Slot(key, p.block_size, s_table) * row : 0;
    CpAsync16(&sm.k[st][r][Swz(r, ch * 8)], kbase + at + ch * 8, valid);
    CpAsync16(&sm.v[st][r][Swz(r, ch * 8)], vbase + at + ch * 8, valid);
  };
  // This thread's pieces of every tile: rows r0 + i kRowStep (i < kPieces), chunk ch0 (the
  // pieces threadIdx.x + i kThreads of the tile's kTileKeys * kChunks, row-major), addressed
  // once a row from kpiece / vpiece. Session 55 (H100): a division by the block size and 64-bit
  // products per piece were a third of the 2-warp blocks' instructions at Llama-3-8B batch 64
  // (6.02M -> 4.11M a launch; its time level), and SmolLM2-135M b1 went 0.418-0.422 -> 0.404-0.408.
  constexpr int kRowStep = kThreads / kChunks;
  constexpr int kPieces = kTileKeys / kRowStep;
  static_assert(kThreads % kChunks == 0 && kTileKeys % kRowStep == 0);
  const int r0 = threadIdx.x / kChunks, ch0 = threadIdx.x % kChunks;
  const __nv_bfloat16* kpiece = kbase + ch0 * 8;
  const __nv_bfloat16* vpiece = vbase + ch0 * 8;
  // Copies this thread's pieces of tile `tile` but row skip_row's (-1: none).
  const auto copy_rows = [&](int tile, int skip_row) {
    const int st = tile % kStages;
    const int key0 = begin + tile * kTileKeys + r0;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int r = r0 + i * kRowStep, key = key0 + i * kRowStep;
      if (r == skip_row) continue;
      const bool valid = key < end;
      const int64_t at = valid ? range.Slot(key, p.block_size, s_table) * row : 0;
      CpAsync16(&sm.k[st][r][Swz(r, ch0 * 8)], kpiece + at, valid);
      CpAsync16(&sm.v[st][r][Swz(r, ch0 * 8)], vpiece + at, valid);
    }
  };
  // kRope: where the newest key is (-1: not in this partition) and, in threads 0 .. kUnits - 1,
  // its K unit (pairs 4 j .. 4 j + 3) and V chunk (16 bytes at 8 j), rotated (`rotated`) after the
  // tiles' first copies are out, then written to the caches and to their tile's row, at once for
  // a first tile or when its tile is copied (that tile's cp.async pieces skip the row).
  [[maybe_unused]] int rope_tile = -1, rope_row = -1;
  [[maybe_unused]] bool rotated = false;
  [[maybe_unused]] uint2 new_lo{}, new_hi{};
  [[maybe_unused]] uint4 new_v{};
  const auto put_newest = [&]() {
    const int st = rope_tile % kStages, j = threadIdx.x, r = rope_row;
    *reinterpret_cast<uint2*>(&sm.k[st][r][Swz(r, 4 * j)]) = new_lo;
    *reinterpret_cast<uint2*>(&sm.k[st][r][Swz(r, kHalf + 4 * j)]) = new_hi;
    *reinterpret_cast<uint4*>(&sm.v[st][r][Swz(r, 8 * j)]) = new_v;
  };
  const auto copy_tile = [&](int tile) {
    copy_rows(tile, kRope && tile == rope_tile ? rope_row : -1);
    if constexpr (kRope) {
      if (rotated && tile == rope_tile && threadIdx.x < kUnits) put_newest();
    }
  };
  // Prefetch (kPrefetch: DecodeAttentionParams::prefetch_kv): the first kStages tiles before the
  // wait but for the newest key's row, written by the kernel this one waits for, which is copied
  // after it (never twice: two copies to one row in different groups could land in either
  // order). newest_tile / newest_row: where that key is, -1 when not in the prefetched tiles.
  [[maybe_unused]] int newest_tile = -1, newest_row = -1;
  if constexpr (kPrefetch) {
    const int newest = range.ctx - 1;
    if (newest >= begin && newest < end && (newest - begin) / kTileKeys < kStages) {
      newest_tile = (newest - begin) / kTileKeys;
      newest_row = (newest - begin) % kTileKeys;
    }
    for (int tile = 0; tile < kStages; ++tile) {
      if (!role.skip && tile < tiles) copy_rows(tile, tile == newest_tile ? newest_row : -1);
      CpAsyncCommit();
    }
    PdlWait();  // launch.h: every thread waits, before any early return
    PdlLaunchDependents();
    if (role.skip) return;
  }
  // kRope: the query rows' units of this thread (unit u: row c / kUnits, pairs 4 (c % kUnits) ..,
  // c = threadIdx.x + u kThreads), loaded here and rotated after the tiles' first copies are out.
  constexpr int kQUnits = (kRows * kUnits + kThreads - 1) / kThreads;
  [[maybe_unused]] uint2 q_lo[kQUnits], q_hi[kQUnits];
  if constexpr (kRope) {
    const int newest = range.ctx - 1;  // context_lens - 1, at positions[seq]
    if (rope_slot >= 0 && newest >= begin && newest < end) {
      rope_tile = (newest - begin) / kTileKeys;
      rope_row = (newest - begin) % kTileKeys;
      if (threadIdx.x < kUnits) {
        const int j = threadIdx.x;
        const int64_t src = seq * p.q_stride + static_cast<int64_t>(kv_head) * kD;
        new_lo = *reinterpret_cast<const uint2*>(p.rope.new_k + src + 4 * j);
        new_hi = *reinterpret_cast<const uint2*>(p.rope.new_k + src + kHalf + 4 * j);
        new_v = *reinterpret_cast<const uint4*>(p.rope.new_v + src + 8 * j);
      }
    }
#pragma unroll
    for (int u = 0; u < kQUnits; ++u) {
      const int c = threadIdx.x + u * kThreads, r = c / kUnits, j = c % kUnits;
      q_lo[u] = q_hi[u] = uint2{0, 0};  // zeros past the group
      if (c < kRows * kUnits && r < group) {
        const __nv_bfloat16* x = p.q + seq * p.q_stride + static_cast<int64_t>(head0 + r) * kD;
        q_lo[u] = *reinterpret_cast<const uint2*>(x + 4 * j);
        q_hi[u] = *reinterpret_cast<const uint2*>(x + kHalf + 4 * j);
      }
    }
  } else {
    // The query rows (zeros past the group): with tile 0, or (kPrefetch) with the newest key's
    // row in a group after the prefetched tiles.
    for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const bool valid = r < group;
      const __nv_bfloat16* src =
          p.q + seq * p.q_stride + static_cast<int64_t>(head0 + (valid ? r : 0)) * kD + ch * 8;
      CpAsync16(&sm.q[r][Swz(r, ch * 8)], src, valid);
    }
  }
  if constexpr (kPrefetch) {
    if (newest_tile >= 0) {
      for (int ch = threadIdx.x; ch < kChunks; ch += kThreads) {
        copy_piece(newest_tile, newest_row, ch);
      }
    }
    CpAsyncCommit();
  } else {
    for (int tile = 0; tile < kStages; ++tile) {
      if (tile < tiles) copy_tile(tile);
      CpAsyncCommit();
    }
  }
  if constexpr (kRope) {
    // With the first tiles' copies in flight: q rotated into its rows (the barrier before tile 0
    // is read publishes them), and the newest key rotated and stored to the caches and, if its
    // tile is one of those, to its row.
#pragma unroll
    for (int u = 0; u < kQUnits; ++u) {
      const int c = threadIdx.x + u * kThreads, r = c / kUnits, j = c % kUnits;
      if (c >= kRows * kUnits) continue;
      if (r < group) RotateBf16x4(q_lo[u], q_hi[u], angle(4 * j), angle(kHalf + 4 * j));
      *reinterpret_cast<uint2*>(&sm.q[r][Swz(r, 4 * j)]) = q_lo[u];
      *reinterpret_cast<uint2*>(&sm.q[r][Swz(r, kHalf + 4 * j)]) = q_hi[u];
    }
    if (rope_tile >= 0 && threadIdx.x < kUnits) {
      const int j = threadIdx.x;
      RotateBf16x4(new_lo, new_hi, angle(4 * j), angle(kHalf + 4 * j));
      const int64_t dst =
          static_cast<int64_t>(rope_slot) * row + static_cast<int64_t>(kv_head) * kD;
      *reinterpret_cast<uint2*>(p.rope.k_cache + dst + 4 * j) = new_lo;
      *reinterpret_cast<uint2*>(p.rope.k_cache + dst + kHalf + 4 * j) = new_hi;
      *reinterpret_cast<uint4*>(p.rope.v_cache + dst + 8 * j) = new_v;
      if (rope_tile < kStages) put_newest();
    }
    rotated = true;
  }

  const float qscale = p.scale * kLog2e;  // scores in base 2
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: this lane's matrix and row
  uint32_t qa[kD / 16][4];                  // Q as A fragments (loaded with tile 0)
  float o[kD / 8][4];                       // O: rows g, g + 8; dims 8 n + 2 t + {0, 1}
  float m[2] = {-INFINITY, -INFINITY};      // running max of rows g, g + 8 (quad-uniform)
  float l[2] = {0.0f, 0.0f};                // this thread's part of the running sums
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int tile = 0; tile < tiles; ++tile) {
    const int st = tile % kStages;
    if (kPrefetch && tile == 0) {
      CpAsyncWait<0>();  // tile 0's rows are in the first group, q and the newest key in the last
    } else {
      CpAsyncWait<kStages - 1>();
    }
    __syncthreads();  // every thread's copies of this tile have landed
    if (tile == 0) RTGEN_TRACE_MARK(0);  // q and the first tile in shared memory
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const int r = (mi & 1) * 8 + mr;
        LdMatrixX4(qa[kk], &sm.q[r][Swz(r, kk * 16 + (mi >> 1) * 8)]);
      }
    }
    const int kb = warp * 16;  // this warp's keys in the tile
    float s[2][4] = {};        // keys kb + 8 j + 2 t + {0, 1}; rows g (0, 1), g + 8 (2, 3)
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t b[4];
      const int r = kb + (mi >> 1) * 8 + mr;
      LdMatrixX4(b, &sm.k[st][r][Swz(r, kk * 16 + (mi & 1) * 8)]);
      Mma(s[0], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[0], b[1]);
      Mma(s[1], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[2], b[3]);
    }
    const int key0 = begin + tile * kTileKeys + kb + 2 * t;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = key0 + 8 * j + (e & 1) < end ? s[j][e] * qscale : -INFINITY;
      }
    }
    uint32_t pa[4];  // P as the A fragment of the P V mma (keys kb .. kb + 15 as k)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // row g + 8 h
      float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float mn = fmaxf(m[h], mx);
      const float base = mn == -INFINITY ? 0.0f : mn;  // all masked so far: p = 0, no NaN
      const float alpha = exp2f(m[h] - base);          // 0 while m is -inf
      m[h] = mn;
      float pr[2][2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) pr[j][e] = RoundBf16(exp2f(s[j][2 * h + e] - base));
      }
      l[h] = l[h] * alpha + (pr[0][0] + pr[0][1]) + (pr[1][0] + pr[1][1]);
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        o[n][2 * h] *= alpha;
        o[n][2 * h + 1] *= alpha;
      }
      pa[h] = PackBf16x2(pr[0][0], pr[0][1]);      // a0 / a1: keys 2 t, 2 t + 1
      pa[2 + h] = PackBf16x2(pr[1][0], pr[1][1]);  // a2 / a3: keys 8 + 2 t, 8 + 2 t + 1
    }
#pragma unroll
    for (int nd = 0; nd < kD / 16; ++nd) {
      uint32_t b[4];
      const int r = kb + (mi & 1) * 8 + mr;
      LdMatrixX4Trans(b, &sm.v[st][r][Swz(r, nd * 16 + (mi >> 1) * 8)]);
      Mma(o[2 * nd], pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
      Mma(o[2 * nd + 1], pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
    if (tile + kStages < tiles) copy_tile(tile + kStages);
    CpAsyncCommit();
  }
  CpAsyncWait<0>();
  RTGEN_TRACE_MARK(1);  // thread 0's warp through every tile

  // Merge the warps (each holds a running state over its own keys): rescale to the block max,
  // then sum over warps in warp order (fixed, so replays are bitwise equal).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    if (t == 0) s_m[warp][g + 8 * h] = m[h];
  }
  __syncthreads();  // also: every warp is done with the K/V stages that MergeBuffers reuses
  MergeBuffers<kD, kWarps>& mg =
      *reinterpret_cast<MergeBuffers<kD, kWarps>*>(s_raw + offsetof(Stages, k));
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (r >= group) continue;  // a padding row (zero query): nothing reads it
    float bm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, s_m[w][r]);
    const float f = Rescale(m[h], bm);
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      *reinterpret_cast<float2*>(&mg.o[warp][r][8 * n + 2 * t]) =
          make_float2(o[n][2 * h] * f, o[n][2 * h + 1] * f);
    }
    if (t == 0) s_l[warp][r] = l[h] * f;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * kD; idx += kThreads) {
    const int r = idx / kD, d = idx % kD;
    float sum = 0.0f, lsum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      sum += mg.o[w][r][d];
      lsum += s_l[w][r];
    }
    StoreResult(p, static_cast<int64_t>(seq) * p.num_heads + head0 + r, split, kD, d,
                role.direct, sum, lsum, [&] {
                  float bm = -INFINITY;
                  for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, s_m[w][r]);
                  return bm;
                });
  }
  MergeIfLast<kThreads, kRows>(p, seq, head0, group, kD, role);
}

// RTGEN_DECODE_MMA_WARPS=2, 4, 8 or 16 fixes the warps per block (A/B; 16 at head_dim 64 only,
// 8 at 128); 0 when unset.
int ForcedWarps() {
  static const int forced = [] {
    return static_cast<int>(EnvIntOf("RTGEN_DECODE_MMA_WARPS", {0, 2, 4, 8, 16}, 0));  // 0: auto
  }();
  return forced;
}

// Blocks of 16 warps (256-key tiles) exist at head_dim 64: at 128 two stages of their tiles
// (256 KB) do not fit an SM's shared memory.
template <int kD>
constexpr bool kHasSixteen = kD == 64;

// RTGEN_DECODE_MMA_SIXTEEN=0: at most 8 warps a block unless RTGEN_DECODE_MMA_WARPS=16 (A/B; by
// default 16 only with p.prefetch_kv, LaunchFitting).
bool SixteenWarps() {
  static const bool on = EnvOnUnlessZero("RTGEN_DECODE_MMA_SIXTEEN");
  return on;
}

constexpr int kMaxCachedDevices = 16;

// Opts the <kD, kWarps, kStages> kernels into their dynamic shared memory on the current device;
// *per_sm: how many of their blocks an SM holds at once.
template <int kD, int kWarps, int kStages>
cudaError_t OptIn(int* per_sm) {
  constexpr size_t kSmem = sizeof(TileBuffers<kD, kWarps, kStages>);
  *per_sm = 1 << 30;
  for (const auto kernel : {DecodeAttentionMmaKernel<kD, kWarps, kStages, false, false>,
                            DecodeAttentionMmaKernel<kD, kWarps, kStages, true, false>,
                            DecodeAttentionMmaKernel<kD, kWarps, kStages, false, true>}) {
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    int blocks = 0;
    if (err == cudaSuccess) {
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 32 * kWarps, kSmem);
    }
    if (err != cudaSuccess) return err;
    *per_sm = std::min(*per_sm, blocks);  // every variant fits as many
  }
  return cudaSuccess;
}

// How many blocks of the 16-, 8- and 4-warp kernels and of the 2-warp kernel with three stages
// the whole GPU holds at once (sixteen, eight: 0 where that kernel does not fit or, for sixteen,
// does not exist or is switched off).
struct Capacity {
  int64_t sixteen = 0;
  int64_t eight = 0;
  int64_t four = 0;
  int64_t two_deep = 0;
};

// On the current device: the head_dim-kD kernels opted in, and their capacity. Done once per
// device (devices past kMaxCachedDevices: every call); a failure is returned, not remembered.
template <int kD>
cudaError_t Prepare(Capacity* capacity) {
  // 0: not prepared yet
  static std::atomic<int64_t> cached_sixteen[kMaxCachedDevices], cached_eight[kMaxCachedDevices],
      cached_four[kMaxCachedDevices], cached_two_deep[kMaxCachedDevices];
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxCachedDevices) {
    capacity->four = cached_four[device].load(std::memory_order_acquire);
    capacity->sixteen = cached_sixteen[device].load(std::memory_order_relaxed);
    capacity->eight = cached_eight[device].load(std::memory_order_relaxed);
    capacity->two_deep = cached_two_deep[device].load(std::memory_order_relaxed);
    if (capacity->four > 0) return cudaSuccess;
  }
  // two_per_sm is not used: the 2-warp, 2-stage kernel is the fallback whatever its capacity
  // (OptIn still sets its shared memory).
  int sixteen_per_sm = 0, eight_per_sm = 0, four_per_sm = 0, two_per_sm = 0, two_deep_per_sm = 0,
      sms = 0;
  // A device without the shared memory of an 8-warp block (~136 KB at head_dim 128) runs 4 or 2;
  // one without a 16-warp block's (~130 KB at head_dim 64), 8 or fewer.
  if constexpr (kHasSixteen<kD>) {
    if (OptIn<kD, 16, 2>(&sixteen_per_sm) != cudaSuccess) {
      sixteen_per_sm = 0;
      (void)cudaGetLastError();
    }
    if (!SixteenWarps()) sixteen_per_sm = 0;  // opted in still: RTGEN_DECODE_MMA_WARPS=16
  }
  if (OptIn<kD, 8, 2>(&eight_per_sm) != cudaSuccess) {
    eight_per_sm = 0;
    (void)cudaGetLastError();  // not sticky: clear it so no later check reports it
  }
  if ((err = OptIn<kD, 4, 2>(&four_per_sm)) != cudaSuccess ||
      (err = OptIn<kD, 2, 2>(&two_per_sm)) != cudaSuccess ||
      (err = OptIn<kD, 2, 3>(&two_deep_per_sm)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) !=
          cudaSuccess) {
    return err;
  }
  capacity->sixteen = int64_t{sixteen_per_sm} * sms;
  capacity->eight = int64_t{eight_per_sm} * sms;
  capacity->four = int64_t{four_per_sm} * sms;
  capacity->two_deep = int64_t{two_deep_per_sm} * sms;
  if (device < kMaxCachedDevices) {
    cached_sixteen[device].store(capacity->sixteen, std::memory_order_relaxed);
    cached_eight[device].store(capacity->eight, std::memory_order_relaxed);
    cached_two_deep[device].store(capacity->two_deep, std::memory_order_relaxed);
    cached_four[device].store(capacity->four, std::memory_order_release);  // published last
  }
  return cudaSuccess;
}

template <int kD, int kWarps, int kStages>
cudaError_t Launch(const DecodeAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_kv_heads, p.num_seqs, p.num_splits);
  constexpr size_t kSmem = sizeof(TileBuffers<kD, kWarps, kStages>);
  const auto kernel = p.rope.on()    ? DecodeAttentionMmaKernel<kD, kWarps, kStages, false, true>
                      : p.prefetch_kv ? DecodeAttentionMmaKernel<kD, kWarps, kStages, true, false>
                                      : DecodeAttentionMmaKernel<kD, kWarps, kStages, false, false>;
  return LaunchKernel(kernel, grid, 32 * kWarps, kSmem, stream, p);
}

// The most warps (the longest key tile: fewer tiles per sequence, one after another in a block)
// with which every block of the grid is resident at once: sixteen at head_dim 64 (256-key tiles)
// where the tiles are copied before the wait (p.prefetch_kv), eight (128), four (64), else two
// (32 keys, more blocks per SM than four: one wave instead of two). Sixteen against eight
// (session 38, graph TPOT ms, two rounds): ahead where the qkv GEMV releases attention early and
// the tiles are copied before the wait (Llama-3.2-1B b1 0.797 / 0.798 vs 0.827 / 0.811, b4 0.910
// / 0.910 vs 0.945 / 0.927, b8 0.934 / 0.931 vs 0.969 / 0.950; gemv.cu TcRopeReleasesEarly);
// without the copies level at 1-8 rows (SmolLM2-135M b1 0.440 / 0.441 vs 0.440 / 0.440, 1B b1
// 0.842 / 0.840 vs 0.836 / 0.836) and behind at 16-32 (SmolLM2 b16 0.596 / 0.595 vs 0.582 /
// 0.581, b32 0.803 / 0.804 vs 0.783 / 0.785).
// Measured on the H200 at context ~190 (two stages): Llama-3-8B shape (head_dim 128, 3 blocks of
// 4 warps per SM) batch 32 5.09 ms with 4 warps vs 5.24 with 2, batch 64 5.59 vs 5.42. Eight
// against four (session 12, graph TPOT ms at batch 1): SmolLM2-135M 0.50 vs 0.52, Llama-3.2-1B
// 0.846 vs 0.87, Llama-3-8B 4.08 vs 4.18 at context ~190; 0.64 vs 0.71, 0.93 vs 0.98, 4.23 vs
// 4.41 at context ~2030.
// Two-warp blocks keep three tiles in flight where the grid still fits at once with them (at
// head_dim 128 four blocks per SM instead of five): with two, a block computes one tile while
// only the next is in flight, and every block at about the same time, so DRAM idles (session 19,
// Llama-3-8B b64: attention 17 -> 13.8 us a layer, graph TPOT 5.30 -> 5.18-5.21 ms); past that
// capacity two stages, as before, whose blocks still fit at once where three would need a second
// wave (8B at batch 67-82; not measured).
// Three stages for the 8- and 4-warp blocks were slower (8B b1 3.95 -> 4.23, b8 4.64 -> 4.95).
template <int kD>
int WarpsFitting(const DecodeAttentionParams& p, const Capacity& capacity) {
  const int64_t blocks = int64_t{p.num_kv_heads} * p.num_seqs * p.num_splits;
  const int forced = ForcedWarps() == 16 && !kHasSixteen<kD> ? 8 : ForcedWarps();
  return forced != 0                                   ? forced
         : p.prefetch_kv && blocks <= capacity.sixteen ? 16
         : blocks <= capacity.eight                    ? 8
         : blocks <= capacity.four                     ? 4
                                                       : 2;
}

// Tiles in flight for blocks of `warps` warps: three for 2-warp blocks while the whole grid still
// fits at once with them, else two (see above).
int StagesFitting(const DecodeAttentionParams& p, const Capacity& capacity, int warps) {
  const int64_t blocks = int64_t{p.num_kv_heads} * p.num_seqs * p.num_splits;
  return warps == 2 && blocks <= capacity.two_deep ? 3 : 2;
}

template <int kD>
cudaError_t LaunchFitting(const DecodeAttentionParams& p, cudaStream_t stream) {
  Capacity capacity;
  const cudaError_t err = Prepare<kD>(&capacity);
  if (err != cudaSuccess) return err;
  const int warps = WarpsFitting<kD>(p, capacity);
  if constexpr (kHasSixteen<kD>) {
    if (warps == 16) return Launch<kD, 16, 2>(p, stream);
  }
  if (warps == 8) return Launch<kD, 8, 2>(p, stream);
  if (warps == 4) return Launch<kD, 4, 2>(p, stream);
  return StagesFitting(p, capacity, warps) == 3 ? Launch<kD, 2, 3>(p, stream)
                                                : Launch<kD, 2, 2>(p, stream);
}

// On the current device: the capacities, and the warps a block of DecodeAttentionMma(p) has.
cudaError_t Fit(const DecodeAttentionParams& p, Capacity* capacity, int* warps) {
  const cudaError_t err = p.head_dim == 64 ? Prepare<64>(capacity) : Prepare<128>(capacity);
  if (err == cudaSuccess) {
    *warps = p.head_dim == 64 ? WarpsFitting<64>(p, *capacity) : WarpsFitting<128>(p, *capacity);
  }
  return err;
}

// RTGEN_DECODE_MMA128_SPLITS=0: head_dim 128 with key partitions on the CUDA-core kernel (A/B).
bool Mma128Splits() {
  static const bool on = EnvOnUnlessZero("RTGEN_DECODE_MMA128_SPLITS");
  return on;
}

}  // namespace

bool DecodeAttentionMmaSupports(const DecodeAttentionParams& p) {
  // Split head_dim 128 too since 8-warp blocks (session 12, H200, context ~190, graph TPOT):
  // Llama-3-8B shape b1 4.07-4.10 ms against 4.17-4.18 on the CUDA-core kernel, b8 4.55 against
  // 4.65; at context ~2030, b1 4.23 against 4.38.
  return p.tensor_cores &&
         (p.head_dim == 64 || (p.head_dim == 128 && (p.num_splits == 1 || Mma128Splits()))) &&
         p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
         p.num_heads / p.num_kv_heads <= kRows;
}

cudaError_t DecodeAttentionMma(const DecodeAttentionParams& p, cudaStream_t stream) {
  return p.head_dim == 64 ? LaunchFitting<64>(p, stream) : LaunchFitting<128>(p, stream);
}

int DecodeAttentionMmaWarps(const DecodeAttentionParams& p) {
  Capacity capacity;
  int warps = 0;
  const cudaError_t err = Fit(p, &capacity, &warps);
  return err != cudaSuccess ? -static_cast<int>(err) : warps;
}

int DecodeAttentionMmaStages(const DecodeAttentionParams& p) {
  Capacity capacity;
  int warps = 0;
  const cudaError_t err = Fit(p, &capacity, &warps);
  return err != cudaSuccess ? -static_cast<int>(err) : StagesFitting(p, capacity, warps);
}

}  // namespace rtgen::kernels
