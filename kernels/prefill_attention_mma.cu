#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/launch.h"
#include "kernels/mma.cuh"
#include "kernels/prefill_attention_mma.h"
#include "kernels/prefill_runs.h"

namespace rtgen::kernels {
namespace {

constexpr int kRowWarps = 4;                   // warps of a key group, 16 query rows each
constexpr int kBlockRows = kPrefillBlockRows;  // query tokens of a block (prefill_runs.h)
static_assert(kBlockRows == 16 * kRowWarps);
constexpr int kGroupKeys = 64;                 // keys of a tile a key group attends to

// A block of kGroups key groups (kGroups * kRowWarps warps): every group holds all kBlockRows
// rows and takes its own 64 keys of each tile (kGroups * 64 keys), so a block walks a sequence's
// keys in 1 / kGroups of the tiles; the groups' states are merged at the end.
template <int kGroups>
constexpr int kThreads = 32 * kRowWarps * kGroups;

// Rows of kD bf16, swizzled (mma.cuh Swz).
template <int kD, int kGroups>
struct PrefillTiles {
  static_assert(kD == 64 || kD == 128, "Swz needs rows of 8 or 16 chunks");
  static constexpr int kTileKeys = kGroupKeys * kGroups;
  static_assert(kThreads<kGroups> == 2 * kTileKeys, "a tile's row is copied by two threads");
  __nv_bfloat16 q[kBlockRows][kD];
  __nv_bfloat16 k[2][kTileKeys][kD];
  __nv_bfloat16 v[2][kTileKeys][kD];
};

// The other groups' states for the final merge, in the K tiles' space (free by then): rows of
// kD + 8 floats (float2 stores of a quad fall in different banks, as decode's MergeBuffers).
template <int kD, int kGroups>
struct GroupMerge {
  static constexpr int kOthers = kGroups > 1 ? kGroups - 1 : 1;  // (one group: unused)
  float o[kOthers][kBlockRows][kD + 8];
  float m[kOthers][kBlockRows];
  float l[kOthers][kBlockRows];
};

// A warp's 16 query rows against one sequence's keys: its running softmax state and output.
template <int kD>
struct RowsState {
  uint32_t qa[kD / 16][4];  // Q as A fragments
  float o[kD / 8][4];       // O: rows g, g + 8; dims 8 n + 2 t + {0, 1}
  float m[2];               // running max (base 2) of rows g, g + 8 (quad-uniform)
  float l[2];               // this thread's part of the running sums
};

// 64 keys of a tile (stage st, rows kb .., keys key0 ..) into a warp's state. lim[h]: row g + 8 h
// sees keys < lim[h] (0: none of this tile's sequence).
template <int kD, int kGroups>
__device__ __forceinline__ void AttendKeys(const PrefillTiles<kD, kGroups>& sm, int st, int kb,
                                           int key0, const int (&lim)[2], float qscale,
                                           RowsState<kD>& rs) {
  const int lane = threadIdx.x & 31, t = lane & 3;
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: this lane's matrix and row
  float s[kGroupKeys / 8][4] = {};          // keys 8 j + 2 t + {0, 1}; rows g (0, 1), g + 8 (2, 3)
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
    for (int j2 = 0; j2 < kGroupKeys / 16; ++j2) {
      uint32_t b[4];
      const int r = kb + j2 * 16 + (mi >> 1) * 8 + mr;
      LdMatrixX4(b, &sm.k[st][r][Swz(r, kk * 16 + (mi & 1) * 8)]);
      const uint32_t(&a)[4] = rs.qa[kk];
      Mma(s[2 * j2], a[0], a[1], a[2], a[3], b[0], b[1]);
      Mma(s[2 * j2 + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
    }
  }
  uint32_t pa[kGroupKeys / 16][4];  // P as A fragments, 16 keys each
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // row g + 8 h
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kGroupKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * j + 2 * t + e;
        float& x = s[j][2 * h + e];
        x = key < lim[h] ? x * qscale : -INFINITY;
        mx = fmaxf(mx, x);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
    const float mn = fmaxf(rs.m[h], mx);
    const float base = mn == -INFINITY ? 0.0f : mn;  // all masked so far: p = 0, no NaN
    const float alpha = exp2f(rs.m[h] - base);       // 0 while m is -inf
    rs.m[h] = mn;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kGroupKeys / 8; ++j) {
      const float p0 = RoundBf16(exp2f(s[j][2 * h] - base));
      const float p1 = RoundBf16(exp2f(s[j][2 * h + 1] - base));
      sum += p0 + p1;
      // a0 / a1 (keys 2 t, 2 t + 1 of a 16-key group) from even j, a2 / a3 (8 + 2 t ..) from odd
      pa[j / 2][(j & 1) * 2 + h] = PackBf16x2(p0, p1);
    }
    rs.l[h] = rs.l[h] * alpha + sum;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      rs.o[n][2 * h] *= alpha;
      rs.o[n][2 * h + 1] *= alpha;
    }
  }
#pragma unroll
  for (int j2 = 0; j2 < kGroupKeys / 16; ++j2) {
#pragma unroll
    for (int nd = 0; nd < kD / 16; ++nd) {
      uint32_t b[4];
      const int r = kb + j2 * 16 + (mi & 1) * 8 + mr;
      LdMatrixX4Trans(b, &sm.v[st][r][Swz(r, nd * 16 + (mi >> 1) * 8)]);
      Mma(rs.o[2 * nd], pa[j2][0], pa[j2][1], pa[j2][2], pa[j2][3], b[0], b[1]);
      Mma(rs.o[2 * nd + 1], pa[j2][0], pa[j2][1], pa[j2][2], pa[j2][3], b[2], b[3]);
    }
  }
}

// One run of a block's rows (prefill_runs.h): its keys [0, kend) (the furthest position of its
// rows + 1, at most the context), each of this thread's two rows' key limit (0 outside the run),
// and the largest limit over the warp (keys past it are masked for every row of the warp).
struct RunPlan {
  int kend = 0;
  int lim[2] = {0, 0};
  int warp_lim = 0;
};

__device__ __forceinline__ RunPlan PlanRun(const PrefillAttentionParams& p, const int32_t* s_seq,
                                           const int32_t* s_pos, int32_t seq, int r0, int r1,
                                           const int (&my_rows)[2]) {
  RunPlan run;
  if (seq < 0) return run;
  const int ctx = p.context_lens[seq];
  for (int r = r0; r < r1; ++r) {
    if (s_seq[r] == seq) run.kend = max(run.kend, s_pos[r] + 1);
  }
  run.kend = min(run.kend, ctx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = my_rows[h];
    run.lim[h] = r >= r0 && r < r1 && s_seq[r] == seq ? min(s_pos[r] + 1, ctx) : 0;
  }
  run.warp_lim = max(run.lim[0], run.lim[1]);
  for (int x = 16; x > 0; x >>= 1) {
    run.warp_lim = max(run.warp_lim, __shfl_xor_sync(kFullMask, run.warp_lim, x));
  }
  return run;
}

// The block-table entry of key `cr` (the row this thread copies of a run's first tile); 0 past
// kend (that row is zero-filled).
__device__ __forceinline__ int32_t FirstTileEntry(const PrefillAttentionParams& p, int32_t seq,
                                                  int kend, int cr) {
  if (seq < 0 || cr >= kend) return 0;
  return p.block_tables[static_cast<int64_t>(seq) * p.max_blocks_per_seq + cr / p.block_size];
}

// grid (num_heads, ceil(num_tokens / kBlockRows)), kThreads<kGroups> threads,
// sizeof(PrefillTiles<kD, kGroups>) bytes of dynamic shared memory. Block y serves tokens from
// (gridDim.y - 1 - y) * kBlockRows: the last tokens, which see the most keys, are scheduled first.
template <int kD, int kGroups>
__global__ void __launch_bounds__(kThreads<kGroups>)
    PrefillAttentionMmaKernel(PrefillAttentionParams p) {
  using Tiles = PrefillTiles<kD, kGroups>;
  constexpr int kTileKeys = Tiles::kTileKeys;
  constexpr int kBlockThreads = kThreads<kGroups>;
  constexpr int kChunks = kD / 8;  // 16-byte pieces per row
  // The merge buffers alias the K stages alone (read no more by then: the last tile's barrier).
  static_assert(kGroups == 1 || sizeof(GroupMerge<kD, kGroups>) <= sizeof(Tiles::k));
  extern __shared__ __align__(16) unsigned char s_raw[];
  Tiles& sm = *reinterpret_cast<Tiles*>(s_raw);
  // seq -1: no keys (zeros written, or nothing at a kPrefillKeepRow position)
  __shared__ int32_t s_seq[kBlockRows], s_pos[kBlockRows];
  const int head = blockIdx.x;
  const int tok0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = warp / kRowWarps, row_warp = warp % kRowWarps;
  const int g = lane >> 2, t = lane & 3;
  const int mi = lane >> 3, mr = lane & 7;
  const int my_rows[2] = {row_warp * 16 + g, row_warp * 16 + g + 8};
  const int cr = threadIdx.x >> 1, ch0 = (threadIdx.x & 1) * (kChunks / 2);  // tile copy share

  // Before the PDL wait, the step's own inputs: token sequences, positions, context lengths and
  // block tables (uploaded before the step's first kernel; no kernel writes them). q, keys and
  // values (this step's qkv projection and KV store wrote them) after it.
  if (threadIdx.x < kBlockRows) {
    const int tok = tok0 + threadIdx.x;
    const int32_t pos = tok < p.num_tokens ? p.positions[tok] : -1;
    s_seq[threadIdx.x] = pos >= 0 ? p.token_seq[tok] : -1;
    s_pos[threadIdx.x] = pos;
  }
  __syncthreads();  // s_seq and s_pos
  if (PrefillRuns(s_seq) > kPrefillMaxRuns) {  // the CUDA-core kernel's (the whole block)
    PdlWait();  // launch.h: a grid completes only after its wait, early returns too
    return;
  }
  // The block's runs (prefill_runs.h; the same on every thread), one after another: each walks
  // its sequence's keys [0, kend) with every row outside it masked (such a row's state is left
  // as it is: p = 0, alpha = 1). The first run's plan and the block-table entry of its first
  // tile's row cr are read before the wait.
  int r0 = 0, r1 = 0;
  int32_t seq = NextPrefillRun(s_seq, 0, &r0, &r1);
  RunPlan run = PlanRun(p, s_seq, s_pos, seq, r0, r1, my_rows);
  int32_t entry0 = FirstTileEntry(p, seq, run.kend, cr);

  PdlWait();
  PdlLaunchDependents();
  for (int c = threadIdx.x; c < kBlockRows * kChunks; c += kBlockThreads) {
    const int r = c / kChunks, ch = c % kChunks, tok = tok0 + r;
    const bool valid = tok < p.num_tokens;
    const __nv_bfloat16* src =
        p.q + static_cast<int64_t>(valid ? tok : 0) * p.q_stride + head * kD + ch * 8;
    CpAsync16(&sm.q[r][Swz(r, ch * 8)], src, valid);
  }
  CpAsyncCommit();  // q's group: it lands with the first tile's (the tile loop's wait)

  RowsState<kD> rs;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) rs.o[n][0] = rs.o[n][1] = rs.o[n][2] = rs.o[n][3] = 0.0f;
  rs.m[0] = rs.m[1] = -INFINITY;
  rs.l[0] = rs.l[1] = 0.0f;
  bool q_loaded = false;  // the same on every thread

  const float qscale = p.scale * kLog2e;  // scores in base 2
  const int64_t row_elems = static_cast<int64_t>(p.num_kv_heads) * kD;  // per cache slot
  const __nv_bfloat16* kbase = p.k_cache + static_cast<int64_t>(kv_head) * kD;
  const __nv_bfloat16* vbase = p.v_cache + static_cast<int64_t>(kv_head) * kD;
  const int kb = group * kGroupKeys;  // this group's keys within a tile
  for (bool first = true; seq >= 0; first = false, seq = NextPrefillRun(s_seq, r1, &r0, &r1)) {
    if (!first) {
      run = PlanRun(p, s_seq, s_pos, seq, r0, r1, my_rows);
      entry0 = FirstTileEntry(p, seq, run.kend, cr);
    }
    const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
    // Row cr of tile `tile` (keys past kend zero-filled), half of its pieces, into its stage.
    const auto copy_tile = [&](int tile) {
      const int st = tile & 1, key = tile * kTileKeys + cr;
      const bool valid = key < run.kend;
      const int32_t entry = tile == 0 ? entry0 : valid ? table[key / p.block_size] : 0;
      const int64_t slot =
          valid ? static_cast<int64_t>(entry) * p.block_size + key % p.block_size : 0;
      const __nv_bfloat16* ks = kbase + slot * row_elems;
      const __nv_bfloat16* vs = vbase + slot * row_elems;
#pragma unroll
      for (int c = ch0; c < ch0 + kChunks / 2; ++c) {
        CpAsync16(&sm.k[st][cr][Swz(cr, c * 8)], ks + c * 8, valid);
        CpAsync16(&sm.v[st][cr][Swz(cr, c * 8)], vs + c * 8, valid);
      }
    };
    const int tiles = (run.kend + kTileKeys - 1) / kTileKeys;
    if (tiles > 0) copy_tile(0);
    CpAsyncCommit();
    for (int tile = 0; tile < tiles; ++tile) {
      if (tile + 1 < tiles) copy_tile(tile + 1);  // into the stage tile - 1 used (barrier below)
      CpAsyncCommit();
      CpAsyncWait<1>();  // this tile's group has landed, and q's (only the newest may not have)
      __syncthreads();
      if (!q_loaded) {
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
          const int r = row_warp * 16 + (mi & 1) * 8 + mr;
          LdMatrixX4(rs.qa[kk], &sm.q[r][Swz(r, kk * 16 + (mi >> 1) * 8)]);
        }
        q_loaded = true;
      }
      const int key0 = tile * kTileKeys + kb;
      if (key0 < run.warp_lim) {  // causal: keys past every row of the warp are skipped
        AttendKeys(sm, tile & 1, kb, key0, run.lim, qscale, rs);
      }
      __syncthreads();  // every warp is done with this stage before it is refilled
    }
  }
  CpAsyncWait<0>();  // q's copies, where no run had a tile: nothing lands after the block ends

  // Each row's sum over its quad; then the groups' states merged into group 0's (in group order,
  // so the result is the same on every run), which writes O / l (zeros for a row that saw no key).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rs.l[h] += __shfl_xor_sync(kFullMask, rs.l[h], 1);
    rs.l[h] += __shfl_xor_sync(kFullMask, rs.l[h], 2);
  }
  if constexpr (kGroups > 1) {
    GroupMerge<kD, kGroups>& mg = *reinterpret_cast<GroupMerge<kD, kGroups>*>(&sm.k[0][0][0]);
    // The loop's last barrier: no warp reads the K tiles any more.
    if (group > 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = my_rows[h];
#pragma unroll
        for (int n = 0; n < kD / 8; ++n) {
          *reinterpret_cast<float2*>(&mg.o[group - 1][r][8 * n + 2 * t]) =
              make_float2(rs.o[n][2 * h], rs.o[n][2 * h + 1]);
        }
        if (t == 0) {
          mg.m[group - 1][r] = rs.m[h];
          mg.l[group - 1][r] = rs.l[h];
        }
      }
    }
    __syncthreads();
    if (group > 0) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = my_rows[h];
      float m = rs.m[h];
      for (int gi = 0; gi < kGroups - 1; ++gi) m = fmaxf(m, mg.m[gi][r]);
      const float f = Rescale(rs.m[h], m);  // 0 for a state that saw no key (m = -inf)
      rs.l[h] *= f;
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        rs.o[n][2 * h] *= f;
        rs.o[n][2 * h + 1] *= f;
      }
      for (int gi = 0; gi < kGroups - 1; ++gi) {
        const float fo = Rescale(mg.m[gi][r], m);
        rs.l[h] += mg.l[gi][r] * fo;
#pragma unroll
        for (int n = 0; n < kD / 8; ++n) {
          const float2 x = *reinterpret_cast<const float2*>(&mg.o[gi][r][8 * n + 2 * t]);
          rs.o[n][2 * h] += x.x * fo;
          rs.o[n][2 * h + 1] += x.y * fo;
        }
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tok = tok0 + my_rows[h];
    // Past the step, or decode attention's row (model_forward.h SplitsDecodeRows): no write.
    if (tok >= p.num_tokens || s_pos[my_rows[h]] == kPrefillKeepRow) continue;
    const float inv = rs.l[h] > 0.0f ? 1.0f / rs.l[h] : 0.0f;
    __nv_bfloat16* out =
        p.out + (static_cast<int64_t>(tok) * p.num_heads + head) * kD + 2 * t;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      *reinterpret_cast<uint32_t*>(out + 8 * n) =
          PackBf16x2(rs.o[n][2 * h] * inv, rs.o[n][2 * h + 1] * inv);
    }
  }
}

template <int kD, int kGroups>
cudaError_t Launch(const PrefillAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_heads, (p.num_tokens + kBlockRows - 1) / kBlockRows);
  return LaunchKernel(PrefillAttentionMmaKernel<kD, kGroups>, grid, kThreads<kGroups>,
                      sizeof(PrefillTiles<kD, kGroups>), stream, p);
}

// Opts the head_dim-kD kernel of kGroups groups into its dynamic shared memory on the current
// device; *per_sm: how many of its blocks an SM holds at once.
template <int kD, int kGroups>
cudaError_t OptIn(int* per_sm) {
  const auto kernel = PrefillAttentionMmaKernel<kD, kGroups>;
  constexpr size_t kSmem = sizeof(PrefillTiles<kD, kGroups>);
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, kThreads<kGroups>, kSmem);
}

constexpr int kMaxCachedDevices = 16;

// On the current device: the head_dim-kD kernels opted in; *two_group_sms the device's SM count
// where a two-group block fits an SM, 0 where it does not (one group only). Done once per device
// (past kMaxCachedDevices: every call); a failure is returned, not remembered.
template <int kD>
cudaError_t Prepare(int* two_group_sms) {
  static std::atomic<int> cached[kMaxCachedDevices];  // two_group_sms + 1; 0: not prepared yet
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxCachedDevices) {
    const int c = cached[device].load(std::memory_order_acquire);
    *two_group_sms = c - 1;
    if (c > 0) return cudaSuccess;
  }
  int one_per_sm = 0, two_per_sm = 0, sms = 0;
  if ((err = OptIn<kD, 1>(&one_per_sm)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) !=
          cudaSuccess) {
    return err;
  }
  if (one_per_sm == 0) return cudaErrorInvalidConfiguration;  // no block fits an SM
  if (OptIn<kD, 2>(&two_per_sm) != cudaSuccess) {
    two_per_sm = 0;  // a device with less shared memory: one group only
    (void)cudaGetLastError();  // not sticky: clear it so no later check reports it
  }
  *two_group_sms = two_per_sm > 0 ? sms : 0;
  if (device < kMaxCachedDevices) {
    cached[device].store(*two_group_sms + 1, std::memory_order_release);
  }
  return cudaSuccess;
}

// Two key groups a block where the grid has at most kTwoGroupBlocksPerSm blocks an SM (few heads
// or prompts up to ~1k tokens: each block's walk over the keys is the critical path, and two
// groups halve it); one group past that (smaller blocks, more of them resident at once).
// Measured on the H200 (TTFT ms at batch 1, one group against two; calls 5 and 12 of session 40,
// two machines, 2-3 rounds each): SmolLM2-135M prompt 2048 (288 blocks) 4.68-5.17 vs 4.05-4.10,
// 4.86 vs 4.37; 1024 (144) 2.78-3.08 vs 2.46-2.47, 2.93-2.94 vs 2.33; Llama-3.2-1B prompt 512
// (256) 2.64-2.66 vs 2.49-2.50, 2.61-2.62 vs 2.60-2.61; 1024 (512) 4.56-4.58 vs 4.23-4.28 but
// 4.35-4.37 vs 4.71-4.78; 2048 (1024) 8.71-8.74 vs 9.18-9.21, 8.97-9.02 vs 9.93-10.02;
// Llama-3-8B prompt 2048 (1024) 54.36 vs 54.73-55.02 (one round).
// PrefillAttentionParams::key_groups (tests), else RTGEN_PREFILL_GROUPS=1 or 2 (A/B), forces one
// (two only where such a block fits).
constexpr int kTwoGroupBlocksPerSm = 3;

template <int kD>
cudaError_t LaunchFitting(const PrefillAttentionParams& p, cudaStream_t stream) {
  int sms = 0;
  const cudaError_t err = Prepare<kD>(&sms);
  if (err != cudaSuccess) return err;
  static const int env_groups = [] {
    return static_cast<int>(EnvIntIn("RTGEN_PREFILL_GROUPS", 0, 2, 0));  // 0: automatic
  }();
  const int forced = p.key_groups != 0 ? p.key_groups : env_groups;
  const int64_t blocks = int64_t{p.num_heads} * ((p.num_tokens + kBlockRows - 1) / kBlockRows);
  const bool two = sms > 0 && (forced != 0 ? forced == 2
                                           : blocks <= int64_t{kTwoGroupBlocksPerSm} * sms);
  return two ? Launch<kD, 2>(p, stream) : Launch<kD, 1>(p, stream);
}

}  // namespace

bool PrefillAttentionMmaSupports(const PrefillAttentionParams& p) {
  return (p.head_dim == 64 || p.head_dim == 128) && p.num_kv_heads > 0 &&
         p.num_heads % p.num_kv_heads == 0 && p.q_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.q) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.out) % 4 == 0;
}

cudaError_t PrefillAttentionMma(const PrefillAttentionParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  return p.head_dim == 64 ? LaunchFitting<64>(p, stream) : LaunchFitting<128>(p, stream);
}

}  // namespace rtgen::kernels
