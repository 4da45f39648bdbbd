// The batch-1 decode step as one persistent kernel (see persistent_decode.h).
//
// Phases of a layer; each reads what the one before handed on (flagged words) and no phase
// waits for the whole grid:
//   Q  residual in -> RMSNorm -> the block's QKV rows -> RoPE on (row i, row i + head_dim/2)
//      pairs -> q | k | v words; the new token's k and v into the paged cache.
//   A  blocks [0, heads × parts): attention over one key partition of one q head -> partial
//      (output, max, sum) words. The other blocks go on to O and wait there.
//   O  every block merges all partials (partition order) into the attention row -> its O rows
//      + residual -> residual words.
//   G  residual -> RMSNorm -> its gate and up rows -> SiLU·mul -> act words.
//   D  act -> its down rows + residual -> next layer's residual words.
// After the last layer every block forms the final norm and streams its share of the LM head
// (fp32 logits, ordinary stores: read after the launch).
//
// Each block's rows of a layer (persistent_layout.cuh BlockRows) sit in shared memory before
// the layer starts: the TMA copies each part of layer l + 2's rows (qkv, O, gate/up, down)
// into the stage layer l used as soon as layer l's phase is done with that part, so the GEMVs
// of a phase read shared memory only and the copies spread over the layer.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "kernels/device_utils.cuh"
#include "kernels/flagged_words.cuh"
#include "kernels/hopper_code.h"
#include "kernels/hopper_ptx.cuh"
#include "kernels/persistent_attention.cuh"
#include "kernels/persistent_decode.h"
#include "kernels/persistent_layout.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

using persistent::BlockRows;
using persistent::Dims;
using persistent::KeyParts;
using persistent::kTableCache;
using persistent::kThreads;
using persistent::kWarps;
using persistent::SmemPlan;
using persistent::Words;

struct Shared {
  unsigned char* stages;    // two stages: the block's rows of layer l in stage l % 2
  int stage_bytes;
  __device__ unsigned char* stage(int layer) const { return stages + (layer & 1) * stage_bytes; }
  __nv_bfloat16* x;         // GEMV input
  float* xf;                // fp32 residual [hidden]
  float* res;               // GEMV results, one per staged row of the phase
  float* att;               // attention partials (O), or the attention block's scratch (A)
  float* cs;                // RoPE cos [head_dim / 2], then sin
  int32_t* table;           // block table row 0 (first kTableCache entries)
  float* scratch;           // 32 floats for block sums
  uint64_t* bars;           // [2] mbarriers, one per stage
  PersistentLayer* layers;  // [num_layers] weight pointers
};

// res[j] = row j · x for n rows of k elements that start at `rows` (shared memory, k % 8 == 0).
// The work is cut into tasks (row, k slice): when the block has more warps than rows, a row is
// cut into `slices` (a power of two, so the tasks of one warp share a slice and its x chunks);
// a warp takes up to kTasks tasks at once and issues every load of a pass (x and the rows,
// kUnroll 16-byte chunks per lane each) before its first multiply-add, so its shared-memory
// loads overlap instead of each waiting for the FMA chain before it, and keeps kUnroll sums per
// task (chains of eight dependent multiply-adds a pass, not 8 kUnroll). Slices are summed in
// slice order through `partial` (fewer than 2 kWarps floats): deterministic.
__device__ void StagedGemv(const unsigned char* rows, int n, int k, const __nv_bfloat16* x,
                           float* res, float* partial) {
  constexpr int kTasks = 2, kUnroll = 3;
  static_assert((kWarps & (kWarps - 1)) == 0, "slices must divide the warp count");
  static_assert(2 * kWarps <= 32, "partial sums live in the 32-float block scratch");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, chunks = k >> 3;
  int shift = 0;  // log2(slices)
  while ((1 << shift) < kWarps && (n << shift) < kWarps) ++shift;
  const int slices = 1 << shift, tasks = n << shift;
  const int slice_chunks = (chunks + slices - 1) >> shift;
  const uint4* xs = reinterpret_cast<const uint4*>(x);
  for (int t0 = warp; t0 < tasks; t0 += kWarps * kTasks) {
    const int slice = t0 & (slices - 1);  // every task t0 + kWarps i has it (slices | kWarps)
    const int c_end = min(chunks, (slice + 1) * slice_chunks);
    const uint4* w[kTasks];
    bool live[kTasks];
#pragma unroll
    for (int i = 0; i < kTasks; ++i) {
      const int t = t0 + kWarps * i;
      live[i] = t < tasks;
      w[i] = reinterpret_cast<const uint4*>(rows) + (live[i] ? t >> shift : 0) * chunks;
    }
    float acc[kTasks][kUnroll] = {};  // kUnroll chains per task: short dependent FMA runs
    for (int c0 = slice * slice_chunks + lane; c0 < c_end; c0 += 32 * kUnroll) {
      uint4 xv[kUnroll], wv[kTasks][kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        xv[u] = c < c_end ? xs[c] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < kTasks; ++i) {
          wv[i][u] = c < c_end && live[i] ? w[i][c] : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int i = 0; i < kTasks; ++i) acc[i][u] = Dot8(wv[i][u], xv[u], acc[i][u]);
      }
    }
    float sum[kTasks];
#pragma unroll
    for (int i = 0; i < kTasks; ++i) {
      sum[i] = acc[i][0];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) sum[i] += acc[i][u];
    }
    // Both tasks' warp sums in five shuffles: the first exchange leaves task 0's half-sums in
    // lanes 0-15 and task 1's in lanes 16-31; each half then reduces on its own.
    static_assert(kTasks == 2);
    const bool upper = lane & 16;
    float v = upper ? sum[1] : sum[0];
    v += __shfl_xor_sync(kFullMask, upper ? sum[0] : sum[1], 16);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    const int i = upper ? 1 : 0;
    if ((lane & 15) == 0 && live[i]) (slices == 1 ? res : partial)[t0 + kWarps * i] = v;
  }
  if (slices == 1) return;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += kThreads) {
    float v = 0.0f;
    for (int s = 0; s < slices; ++s) v += partial[(j << shift) + s];
    res[j] = v;
  }
}

// The parts of a layer's staged rows, copied one part at a time: the TMA refills a part of the
// stage as soon as the phase that reads it has finished with it, so the copies spread over the
// layer instead of queueing as one burst in front of the next hand-off's loads.
enum class StagePart { kQkv, kO, kGateUp, kDown };
constexpr uint32_t kStageParts = 4;  // arrivals per stage fill (the mbarrier's count)

// Starts the TMA copies of one part of one layer's rows (`w`) into stage `layer` % 2: up to
// five contiguous copies, one per lane of the calling warp (the block's last). The block has
// finished reading that part of the stage.
__device__ void StageLayerPart(const PersistentLayer& w, const Dims& d, const BlockRows& r,
                               const Shared& sh, int layer, StagePart part) {
#if RTGEN_HOPPER_DEVICE_CODE
  const int lane = threadIdx.x & 31, half = d.head_dim / 2;
  uint64_t* bar = sh.bars + (layer & 1);
  const int bytes[] = {r.qkv_bytes, r.o_bytes, r.gate_up_bytes, r.down_bytes};
  hopper::FenceProxyAsyncShared();
  if (lane == 0) {
    hopper::MbarArriveExpectTx(bar, static_cast<uint32_t>(bytes[static_cast<int>(part)]));
  }
  __syncwarp();
  const __nv_bfloat16* src = w.wqkv;
  const int row_bytes = d.hidden * 2;  // of qkv and gate_up rows
  int first = 0, rows = 0, k = d.hidden, offset = 0;  // offset: bytes into the stage
  switch (part) {
    case StagePart::kQkv: {
      // The pairs span at most two heads (ConfigurePersistentDecode):
      // rows lo0 | lo1 | hi0 | hi1.
      const int np = r.pairs.size(), h0 = r.pairs.begin / half, i0 = r.pairs.begin % half;
      const int n0 = min(np, half - i0), n1 = np - n0;
      switch (lane) {
        case 0: first = h0 * d.head_dim + i0, rows = n0; break;
        case 1: first = (h0 + 1) * d.head_dim, rows = n1, offset = n0 * row_bytes; break;
        case 2: first = h0 * d.head_dim + half + i0, rows = n0, offset = np * row_bytes; break;
        case 3:
          first = (h0 + 1) * d.head_dim + half, rows = n1, offset = (np + n0) * row_bytes;
          break;
        case 4:
          first = d.q_dim + d.kv_dim + r.v.begin, rows = r.v.size();
          offset = 2 * np * row_bytes;
          break;
        default: break;
      }
      break;
    }
    case StagePart::kO:
      src = w.wo, first = r.o.begin, rows = lane == 0 ? r.o.size() : 0, k = d.q_dim;
      offset = r.o_offset();
      break;
    case StagePart::kGateUp:
      src = w.w_gate_up, first = lane * d.inter + r.f.begin, rows = lane < 2 ? r.f.size() : 0;
      offset = r.gate_up_offset() + lane * r.f.size() * row_bytes;
      break;
    case StagePart::kDown:
      src = w.w_down, first = r.down.begin, rows = lane == 0 ? r.down.size() : 0, k = d.inter;
      offset = r.down_offset();
      break;
  }
  if (rows > 0) {
    hopper::BulkLoad(sh.stage(layer) + offset, src + int64_t{first} * k,
                     static_cast<uint32_t>(rows * k * 2), bar, EvictFirstPolicy());
  }
#endif
}

// Every part of one layer's rows (the first two layers, before the loop).
__device__ void StageLayer(const PersistentLayer& w, const Dims& d, const BlockRows& r,
                           const Shared& sh, int layer) {
  for (StagePart part : {StagePart::kQkv, StagePart::kO, StagePart::kGateUp, StagePart::kDown}) {
    StageLayerPart(w, d, r, sh, layer, part);
  }
}

// x = bf16(xf * rsqrt(mean(xf^2) + eps) * weight); sum_sq is this thread's part of sum(xf^2).
__device__ void NormToX(float sum_sq, const float* weight, int hidden, float eps,
                        const Shared& sh) {
  sum_sq = BlockSum(sum_sq, sh.scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    sh.x[i] = __float2bfloat16(sh.xf[i] * inv_rms * weight[i]);
  }
  __syncthreads();
}

// xf = the residual words (or the embedding row for layer 0), then x = its RMSNorm.
__device__ void ResidualNormToX(const uint64_t* words, const float* embedding,
                                const float* weight, int hidden, float eps, uint32_t flag,
                                const Shared& sh) {
  float sum_sq = 0.0f;
  if (words == nullptr) {
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
      const float v = __ldcg(embedding + i);
      sh.xf[i] = v;
      sum_sq += v * v;
    }
  } else {
    AwaitWords<kThreads>(words, hidden, flag, [&](int i, uint32_t u) {
      const float v = __uint_as_float(u);
      sh.xf[i] = v;
      sum_sq += v * v;
    });
  }
  NormToX(sum_sq, weight, hidden, eps, sh);
}

// Q epilogue: rotate the block's pairs, hand on q | k | v words, store the new k and v.
template <int HD>
__device__ void QkvEpilogue(const Dims& d, const BlockRows& r, const Shared& sh, int64_t new_row,
                            __nv_bfloat16* k_cache, __nv_bfloat16* v_cache, uint64_t* words,
                            uint32_t flag) {
  constexpr int kHalf = HD / 2;
  const int np = r.pairs.size(), nv = r.v.size();
  for (int t = threadIdx.x; t < np / 2; t += kThreads) {
    const int j = 2 * t, pair = r.pairs.begin + j, head = pair / kHalf, i = pair % kHalf;
    const RotatedPair a = RotateHalf(RoundBf16(sh.res[j]), RoundBf16(sh.res[np + j]), sh.cs[i],
                                     sh.cs[kHalf + i]);
    const RotatedPair b = RotateHalf(RoundBf16(sh.res[j + 1]), RoundBf16(sh.res[np + j + 1]),
                                     sh.cs[i + 1], sh.cs[kHalf + i + 1]);
    const int lo = head * HD + i;
    StoreWord(words + lo / 2, PackBf16(a.lo, b.lo), flag);
    StoreWord(words + (lo + kHalf) / 2, PackBf16(a.hi, b.hi), flag);
    if (head >= d.heads && new_row >= 0) {
      __nv_bfloat16* kc = k_cache + new_row + (head - d.heads) * HD + i;
      *reinterpret_cast<__nv_bfloat162*>(kc) = __halves2bfloat162(a.lo, b.lo);
      *reinterpret_cast<__nv_bfloat162*>(kc + kHalf) = __halves2bfloat162(a.hi, b.hi);
    }
  }
  for (int t = threadIdx.x; t < nv / 2; t += kThreads) {
    const int j = 2 * np + 2 * t, v = r.v.begin + 2 * t;
    const __nv_bfloat16 a = __float2bfloat16(sh.res[j]), b = __float2bfloat16(sh.res[j + 1]);
    StoreWord(words + (d.q_dim + d.kv_dim + v) / 2, PackBf16(a, b), flag);
    if (new_row >= 0) {
      *reinterpret_cast<__nv_bfloat162*>(v_cache + new_row + v) = __halves2bfloat162(a, b);
    }
  }
}

// O prologue: x = the attention row, every head's partitions merged in partition order.
template <int HD>
__device__ void MergeToX(const Dims& d, const KeyParts& kp, const uint64_t* words,
                         uint32_t flag, const Shared& sh) {
  constexpr int kPart = HD + 2;
  AwaitWords<kThreads>(words, d.heads * kp.parts * kPart, flag,
                       [&](int i, uint32_t u) { sh.att[i] = __uint_as_float(u); });
  __syncthreads();
  for (int e = threadIdx.x; e < d.q_dim; e += kThreads) {
    const float* part = sh.att + (e / HD) * kp.parts * kPart;
    const int dim = e % HD;
    float mx = -INFINITY;
    for (int q = 0; q < kp.parts; ++q) mx = fmaxf(mx, part[q * kPart + HD]);
    float out = 0.0f, sum = 0.0f;
    for (int q = 0; q < kp.parts; ++q) {
      const float m = part[q * kPart + HD];
      const float w = m == -INFINITY ? 0.0f : exp2f(m - mx);
      out = fmaf(w, part[q * kPart + dim], out);
      sum = fmaf(w, part[q * kPart + HD + 1], sum);
    }
    sh.x[e] = __float2bfloat16(sum > 0.0f ? out / sum : 0.0f);
  }
  __syncthreads();
}

// The LM head: rows spread over every warp of the grid, four at a time, weights streamed from
// global memory. The first rows' loads are issued before the final residual is awaited.
__device__ void LmHead(const PersistentDecodeParams& p, const uint64_t* final_words,
                       uint32_t flag, const Shared& sh) {
  constexpr int kG = 4, kU = 4;  // rows per group, 16-byte loads per lane per row (hidden <= 1024)
  const int lane = threadIdx.x & 31, chunks = p.hidden >> 3;
  const int slots = kWarps * gridDim.x;
  uint4 wv[kG][kU];
  auto load = [&](int g0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int row = min(g0 + g, p.vocab - 1);
      const uint4* w = reinterpret_cast<const uint4*>(p.lm_head + int64_t{row} * p.hidden);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int c = u * 32 + lane;
        wv[g][u] = LoadStreamed16(w + c, c < chunks);
      }
    }
  };
  int g0 = ((threadIdx.x >> 5) * gridDim.x + blockIdx.x) * kG;
  if (g0 < p.vocab) load(g0);
  ResidualNormToX(final_words, nullptr, p.final_norm, p.hidden, p.eps, flag, sh);
  const uint4* xs = reinterpret_cast<const uint4*>(sh.x);
  for (; g0 < p.vocab; g0 += slots * kG) {
    float acc[kG] = {};
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int c = u * 32 + lane;
      if (c < chunks) {
        const uint4 xv = xs[c];
#pragma unroll
        for (int g = 0; g < kG; ++g) acc[g] = Dot8(wv[g][u], xv, acc[g]);
      }
    }
    if (g0 + slots * kG < p.vocab) load(g0 + slots * kG);
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const float v = WarpSum(acc[g]);
      if (lane == g && g0 + g < p.vocab) p.logits[g0 + g] = v;
    }
  }
}

template <int HD>
__global__ void __launch_bounds__(kThreads, 1)
    PersistentDecodeKernel(PersistentDecodeParams p, SmemPlan plan) {
#if RTGEN_HOPPER_DEVICE_CODE
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint32_t s_flag;
  const Shared sh{smem,
                  plan.stage_bytes,
                  reinterpret_cast<__nv_bfloat16*>(smem + plan.x),
                  reinterpret_cast<float*>(smem + plan.xf),
                  reinterpret_cast<float*>(smem + plan.res),
                  reinterpret_cast<float*>(smem + plan.att),
                  reinterpret_cast<float*>(smem + plan.cs),
                  reinterpret_cast<int32_t*>(smem + plan.table),
                  reinterpret_cast<float*>(smem + plan.scratch),
                  reinterpret_cast<uint64_t*>(smem + plan.bars),
                  reinterpret_cast<PersistentLayer*>(smem + plan.layer_table)};
  const Dims d(p);
  const BlockRows rows(d, gridDim.x, blockIdx.x);
  const Words words(d);
  const int warp = threadIdx.x >> 5;
  auto stamp = [&](int layer, int point) {
    if (p.trace != nullptr && threadIdx.x == 0) {
      const int64_t i = (layer * kPersistentTracePoints + point) * gridDim.x + blockIdx.x;
      // The SM clock first: a global-timer read is slow (~0.35 us measured in the step) and the
      // own times (clock differences) should not carry it.
      const uint64_t cycles = clock64();
      p.trace[i] = GlobalTimerNs();
      p.trace[i + int64_t{p.num_layers} * kPersistentTracePoints * gridDim.x] = cycles;
    }
  };

  // This launch's flag (never 0: the exchange starts zeroed), the stages' barriers (one arrival
  // per part of a fill), the layer table, the first two layers' rows in flight.
  if (threadIdx.x == 0) {
    const uint32_t done = *reinterpret_cast<volatile uint32_t*>(p.epoch);
    s_flag = done + 1 == 0 ? 1 : done + 1;
    hopper::MbarInit(&sh.bars[0], kStageParts);
    hopper::MbarInit(&sh.bars[1], kStageParts);
    hopper::FenceBarrierInit();
  }
  for (int i = threadIdx.x; i < p.num_layers; i += kThreads) sh.layers[i] = p.layers[i];
  __syncthreads();
  const uint32_t flag = s_flag;
  if (warp == kWarps - 1) {
    StageLayer(sh.layers[0], d, rows, sh, 0);
    if (p.num_layers > 1) StageLayer(sh.layers[1], d, rows, sh, 1);
  }

  // Step constants: key partitions, RoPE angles (as RopeKvStore: fp64, then fp32), block table.
  const KeyParts kp(p.context_lens[0], persistent::MaxParts(d, gridDim.x), p.keys_per_part);
  const int32_t slot = p.slot_mapping[0];
  const int64_t new_row = slot >= 0 ? int64_t{slot} * d.kv_dim : -1;
  for (int i = threadIdx.x; i < HD / 2; i += kThreads) {
    RopeCosSin(p.positions[0], p.inv_freq[i], &sh.cs[i], &sh.cs[HD / 2 + i]);
  }
  const int table_len = (kp.ctx + p.block_size - 1) / p.block_size;
  for (int j = threadIdx.x; j < min(table_len, kTableCache); j += kThreads) {
    sh.table[j] = p.block_table[j];
  }
  __syncthreads();

  const bool attends = static_cast<int>(blockIdx.x) < d.heads * kp.parts;

  for (int layer = 0; layer < p.num_layers; ++layer) {
    const PersistentLayer& w = sh.layers[layer];
    // Each part of the stage refilled with layer + 2's rows once this layer's phase is done
    // with it (by the last warp; every warp has passed a barrier after the phase's GEMV). The
    // copies are started where that warp would wait for its input anyway — qkv at O's start
    // (after A), O at G's, gate/up at D's, down at the next layer's Q — not at a phase's end,
    // where the barrier before the hand-off would wait for them.
    auto refill = [&](int of_layer, StagePart part) {
      if (warp == kWarps - 1 && of_layer + 2 < p.num_layers) {
        StageLayerPart(sh.layers[of_layer + 2], d, rows, sh, of_layer + 2, part);
      }
    };
    uint64_t* ex = p.exchange + layer * words.per_layer;
    uint64_t* next = ex + words.per_layer;
    __nv_bfloat16* k_cache = p.k_cache + layer * p.layer_elems;
    __nv_bfloat16* v_cache = p.v_cache + layer * p.layer_elems;
    const unsigned char* stage = sh.stage(layer);

    // Q: the residual (the embedding row in layer 0), RMSNorm, QKV rows, RoPE, KV store.
    stamp(layer, 0);
    if (layer > 0) refill(layer - 1, StagePart::kDown);
    ResidualNormToX(layer == 0 ? nullptr : ex + words.h, p.residual, w.attn_norm, d.hidden,
                    p.eps, flag, sh);
    stamp(layer, 1);
    for (WaitBudget budget; !hopper::MbarTryWait(sh.bars + (layer & 1), (layer >> 1) & 1);) {
      if (budget.Exhausted()) {
        printf("persistent decode: layer %d weights never arrived (block %d)\n", layer,
               blockIdx.x);
        __trap();
      }
    }
    stamp(layer, 2);
    StagedGemv(stage, rows.qkv_rows(), d.hidden, sh.x, sh.res, sh.scratch);
    __syncthreads();
    stamp(layer, 3);
    QkvEpilogue<HD>(d, rows, sh, new_row, k_cache, v_cache, ex + words.qkv, flag);
    stamp(layer, 4);

    // A: attention partials.
    if (attends) {
      const persistent::AttentionInputs in{
          k_cache, v_cache, sh.table, p.block_table, table_len <= kTableCache, p.block_size,
          ex + words.qkv, ex + words.att, p.scale * kLog2e};
      persistent::AttentionBlock<HD>(d, kp, blockIdx.x / kp.parts, blockIdx.x % kp.parts, in,
                                     flag, sh.att, [&] { stamp(layer, 5); });
    } else {
      stamp(layer, 5);
    }
    __syncthreads();
    stamp(layer, 6);

    // O: merge, O rows + residual.
    refill(layer, StagePart::kQkv);
    MergeToX<HD>(d, kp, ex + words.att, flag, sh);
    stamp(layer, 7);
    StagedGemv(stage + rows.o_offset(), rows.o.size(), d.q_dim, sh.x, sh.res, sh.scratch);
    __syncthreads();
    stamp(layer, 8);
    for (int j = threadIdx.x; j < rows.o.size(); j += kThreads) {
      const int row = rows.o.begin + j;
      StoreWord(ex + words.mid + row, __float_as_uint(sh.xf[row] + RoundBf16(sh.res[j])), flag);
    }
    __syncthreads();
    stamp(layer, 9);

    // G: RMSNorm, gate and up rows, SiLU·mul.
    refill(layer, StagePart::kO);
    ResidualNormToX(ex + words.mid, nullptr, w.ffn_norm, d.hidden, p.eps, flag, sh);
    stamp(layer, 10);
    const int nf = rows.f.size();
    StagedGemv(stage + rows.gate_up_offset(), 2 * nf, d.hidden, sh.x, sh.res, sh.scratch);
    __syncthreads();
    stamp(layer, 11);
    for (int t = threadIdx.x; t < nf / 2; t += kThreads) {
      const int j = 2 * t;
      const __nv_bfloat16 a = SiluTimes(RoundBf16(sh.res[j]), RoundBf16(sh.res[nf + j]));
      const __nv_bfloat16 b = SiluTimes(RoundBf16(sh.res[j + 1]), RoundBf16(sh.res[nf + j + 1]));
      StoreWord(ex + words.act + (rows.f.begin + j) / 2, PackBf16(a, b), flag);
    }
    stamp(layer, 12);

    // D: act, down rows + residual.
    refill(layer, StagePart::kGateUp);
    AwaitWords<kThreads>(ex + words.act, d.inter / 2, flag, [&](int i, uint32_t u) {
      reinterpret_cast<uint32_t*>(sh.x)[i] = u;
    });
    __syncthreads();
    stamp(layer, 13);
    StagedGemv(stage + rows.down_offset(), rows.down.size(), d.inter, sh.x, sh.res, sh.scratch);
    __syncthreads();
    stamp(layer, 14);
    for (int j = threadIdx.x; j < rows.down.size(); j += kThreads) {
      const int row = rows.down.begin + j;
      StoreWord(next + words.h + row, __float_as_uint(sh.xf[row] + RoundBf16(sh.res[j])), flag);
    }
    __syncthreads();
    stamp(layer, 15);
  }

  LmHead(p, p.exchange + p.num_layers * words.per_layer + words.h, flag, sh);

  // The last block to finish advances the launch count (every block read it at its start).
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(p.epoch + 1, 1u) == gridDim.x - 1) {
      p.epoch[1] = 0;
      p.epoch[0] = flag;
      __threadfence();
    }
  }
#else
  __trap();  // built for sm_90a only (ConfigurePersistentDecode refuses other devices)
#endif
}

template <int HD>
PersistentLaunch Configure(const PersistentDecodeParams& p, int device) {
  PersistentLaunch launch;
  int num_sms = 0, max_smem = 0, major = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    return launch;
  }
  const Dims d(p);
  // A block's RoPE pairs must span at most two heads (StageLayerPart copies two runs of each).
  const int most_pairs = persistent::LargestShare((d.q_dim + d.kv_dim) / 4, num_sms, 2);
  if (major != 9 || persistent::MaxParts(d, num_sms) < 1 || most_pairs > HD / 2 ||
      !HopperDeviceCodeRuns(device)) {  // else the kernel's body is a trap
    return launch;
  }
  const SmemPlan plan(d, num_sms);
  // The kernel's dynamic shared-memory limit is per process: raise it, never lower it (another
  // decoder of the same head size may need more). 16 bytes stay for the static flag.
  cudaFuncAttributes attrs{};
  if (plan.total + 16 > max_smem ||
      cudaFuncGetAttributes(&attrs, PersistentDecodeKernel<HD>) != cudaSuccess ||
      cudaFuncSetAttribute(PersistentDecodeKernel<HD>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           std::max(plan.total, attrs.maxDynamicSharedSizeBytes)) !=
          cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PersistentDecodeKernel<HD>,
                                                    kThreads, plan.total) != cudaSuccess ||
      per_sm < 1) {
    cudaGetLastError();  // clear a failed query: the caller falls back to the layered path
    return launch;
  }
  launch.grid = num_sms;  // one block per SM
  launch.threads = kThreads;
  launch.smem_bytes = plan.total;
  return launch;
}

}  // namespace

int64_t PersistentExchangeWords(const PersistentDecodeParams& p) {
  return int64_t{p.num_layers + 1} * persistent::Words(Dims(p)).per_layer;
}

PersistentLaunch ConfigurePersistentDecode(const PersistentDecodeParams& p, int device) {
  const Dims d(p);
  const bool shapes_ok =
      p.num_layers > 0 && p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
      p.hidden > 0 && p.hidden <= 1024 && p.hidden % 8 == 0 && p.inter > 0 &&
      p.inter % 8 == 0 && p.inter <= 8192 && (d.q_dim + d.kv_dim) % 4 == 0 && p.vocab > 0 &&
      p.block_size > 0 && p.keys_per_part >= 16 && p.keys_per_part <= 65536;
  if (!shapes_ok) return {};
  if (p.head_dim == 64) return Configure<64>(p, device);
  if (p.head_dim == 128) return Configure<128>(p, device);
  return {};
}

cudaError_t PersistentDecode(const PersistentDecodeParams& p, const PersistentLaunch& launch,
                             cudaStream_t stream) {
  if (launch.grid <= 0) return cudaErrorInvalidConfiguration;
  const SmemPlan plan(Dims(p), launch.grid);
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
  if (p.head_dim == 64) return cudaLaunchKernelEx(&cfg, PersistentDecodeKernel<64>, p, plan);
  if (p.head_dim == 128) return cudaLaunchKernelEx(&cfg, PersistentDecodeKernel<128>, p, plan);
  return cudaErrorInvalidValue;
}

}  // namespace rtgen::kernels
