// The attention half of a decoder layer at one token, as one thread-block cluster
// (attention_cluster.h).
//
// Block r of the cluster (256 threads):
//   before the PDL wait: TMA copies of its wqkv rows [64 r, 64 r + 64) (r < slices: q head r,
//     then the k heads, then the v heads) and its wo rows; for r < num_heads, the cache rows of
//     the first chunk of earlier keys and values of its kv head, asked of L2; RoPE's angles.
//   phase A (r < slices): x loaded, then (r < num_heads) that chunk copied into shared memory;
//     its 64 qkv rows against x (each warp 8 rows, lanes split k), scaled by
//     the consumer's 1 / rms, rounded to bf16, q / k rotated; k and v stored to the cache slot;
//     the 64 values kept in shared memory (`slice`) for the other blocks.
//   cluster barrier 1.
//   phase B (r < num_heads): attention of query head r over its kv head's keys, one key per
//     thread per chunk (online softmax across chunks); the newest key and value read from the
//     k / v blocks' slices; the output (64 values, bf16) kept in `head_out`.
//   cluster barrier 2.
//   phase C (every block): all heads' outputs gathered from the blocks' `head_out`, its wo rows
//     multiplied by them, joined to the residual (NormLinkJoin) and its sum of squares added to
//     the producer's slot; cluster barrier 3 before leaving.

#include "kernels/attention_cluster.h"

#include <map>
#include <mutex>
#include <utility>

#include "kernels/aligned.h"
#include "kernels/device_utils.cuh"
#include "kernels/hopper_code.h"
#include "kernels/hopper_ptx.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/norm_link.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kHd = kAttentionClusterHeadDim;
constexpr int kChunk = kAttentionClusterChunk;
constexpr int kMaxHidden = 1024;
constexpr int kMaxLaneChunks = kMaxHidden / 8 / 32;  // 16-byte chunks of a row per lane
// wo rows per block (hidden / 16, rounded up) spread over the warps.
constexpr int kMaxORowsPerWarp = (kMaxHidden / kAttentionClusterBlocks + kWarps - 1) / kWarps;
static_assert(kChunk == kThreads, "one key per thread per chunk");
static_assert(kHd == 64, "a head row is 8 chunks; 32 lanes hold 2 dims each");

constexpr int RoundUp16(int bytes) { return (bytes + 15) / 16 * 16; }

// Byte offsets of the shared-memory regions, each 16-byte aligned.
struct SmemLayout {
  int wqkv = 0, wo = 0, keys = 0, values = 0, attn = 0, slice = 0, head_out = 0, sums = 0,
      q = 0, probs = 0, pv = 0, scratch = 0, total = 0;
  __host__ __device__ SmemLayout(int hidden, int num_heads) {
    const int q_dim = num_heads * kHd;
    const int o_rows = (hidden + kAttentionClusterBlocks - 1) / kAttentionClusterBlocks;
    int at = 16;  // two mbarriers
    wqkv = at, at += RoundUp16(kHd * hidden * 2);
    wo = at, at += RoundUp16(o_rows * q_dim * 2);
    keys = at, at += kChunk * kHd * 2;
    values = at, at += kChunk * kHd * 2;
    attn = at, at += RoundUp16(q_dim * 2);
    slice = at, at += kHd * 2;
    head_out = at, at += kHd * 2;
    sums = at, at += kHd * 4;
    q = at, at += kHd * 4;
    probs = at, at += kChunk * 4;
    pv = at, at += kWarps * kHd * 4;
    scratch = at, at += 64 * 4;
    total = at;
  }
};

#if RTGEN_HOPPER_DEVICE_CODE
__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every block of the cluster executes both, in this order; the arrive releases
// this thread's earlier writes to shared memory, the wait acquires the other blocks'.
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The address of `p` (this block's shared memory) in block `rank`'s shared memory.
__device__ __forceinline__ uint32_t PeerAddr(const void* p, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(hopper::SmemAddr(p)),
               "r"(rank));
  return a;
}

__device__ __forceinline__ uint4 LoadPeer16(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Asks L2 for the 128-byte line holding p (no data is returned; nothing waits for it).
__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// The lane's shares of kRows rows of `w` (rows of `chunks` 16-byte chunks in shared memory:
// first_row, first_row + row_step, ...; the first `valid` of them) times the input (xf[i] holds
// chunk lane + 32 i): acc[j] += row j's products. Every row's chunk is loaded before any is
// multiplied and the rows' sums are independent chains, so the warp is not held by the latency
// of one load or one multiply-add at a time (one row after another measured ~1.9 us for 64 rows
// of 576 at 8 warps).
template <int kRows>
__device__ __forceinline__ void LaneShares(const uint4* w, int first_row, int row_step, int valid,
                                           int chunks, int lane,
                                           const float (&xf)[kMaxLaneChunks][8],
                                           float (&acc)[kRows]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j) acc[j] = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxLaneChunks; ++i) {
    const int c = lane + 32 * i;
    if (c >= chunks) continue;
    float wf[kRows][8];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      UnpackBf16x8(j < valid ? w[(first_row + j * row_step) * chunks + c] : make_uint4(0, 0, 0, 0),
                   wf[j]);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
#pragma unroll
      for (int j = 0; j < kRows; ++j) acc[j] = __fmaf_rn(wf[j][e], xf[i][e], acc[j]);
    }
  }
}

// WarpSum of each value, the reductions' levels side by side.
template <int kRows>
__device__ __forceinline__ void WarpSums(float (&v)[kRows]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) v[j] += __shfl_xor_sync(kFullMask, v[j], o);
  }
}
#endif  // RTGEN_HOPPER_DEVICE_CODE

__global__ void __launch_bounds__(kThreads, 1) AttentionClusterKernel(AttentionClusterParams p) {
  RTGEN_TRACE_KERNEL(kAttentionCluster);
#if RTGEN_HOPPER_DEVICE_CODE
  extern __shared__ __align__(128) unsigned char smem[];
  const SmemLayout lay(p.hidden, p.num_heads);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rank = static_cast<int>(ClusterRank());
  const int nh = p.num_heads, nkv = p.num_kv_heads;
  const int slices = nh + 2 * nkv, kvh = rank / (nh / nkv);
  const int q_dim = nh * kHd, kv_dim = nkv * kHd;
  const int x_chunks = p.hidden / 8, attn_chunks = q_dim / 8;
  const int o_per_block = (p.hidden + kAttentionClusterBlocks - 1) / kAttentionClusterBlocks;
  const int o_first = rank * o_per_block;
  const int o_rows = max(0, min(p.hidden - o_first, o_per_block));
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem);  // [0]: wqkv rows, [1]: wo rows
  uint4* keys = reinterpret_cast<uint4*>(smem + lay.keys);      // [kChunk][8], swizzled
  uint4* values = reinterpret_cast<uint4*>(smem + lay.values);  // [kChunk][8]
  uint4* attn = reinterpret_cast<uint4*>(smem + lay.attn);
  __nv_bfloat16* slice = reinterpret_cast<__nv_bfloat16*>(smem + lay.slice);
  __nv_bfloat16* head_out = reinterpret_cast<__nv_bfloat16*>(smem + lay.head_out);
  float* sums = reinterpret_cast<float*>(smem + lay.sums);
  float* qf = reinterpret_cast<float*>(smem + lay.q);
  float* probs = reinterpret_cast<float*>(smem + lay.probs);
  float* pv = reinterpret_cast<float*>(smem + lay.pv);
  float* scratch = reinterpret_cast<float*>(smem + lay.scratch);

  // ---- Before the PDL wait: nothing the kernel before this one writes is read.
  const bool has_slice = rank < slices, attends = rank < nh;
  const uint32_t wqkv_bytes = has_slice ? kHd * p.hidden * 2 : 0;
  const uint32_t wo_bytes = o_rows * q_dim * 2;
  if (tid == 0) {
    hopper::MbarInit(&bars[0], 1);
    hopper::MbarInit(&bars[1], 1);
    hopper::FenceBarrierInit();
    if (has_slice) hopper::MbarArriveExpectTx(&bars[0], wqkv_bytes);
    hopper::MbarArriveExpectTx(&bars[1], wo_bytes);
  }
  __syncthreads();  // the mbarriers' initialisation, before any copy or wait on them
  if (tid == 0) {
    const uint64_t policy = EvictFirstPolicy();
    if (has_slice) {
      hopper::BulkLoad(smem + lay.wqkv, p.wqkv + static_cast<int64_t>(rank) * kHd * p.hidden,
                       wqkv_bytes, &bars[0], policy);
    }
    if (wo_bytes > 0) {
      hopper::BulkLoad(smem + lay.wo, p.wo + static_cast<int64_t>(o_first) * q_dim, wo_bytes,
                       &bars[1], policy);
    }
  }
  // Earlier keys and values (written by earlier steps, which completed before the kernel before
  // this one started: launch.h) of chunk [first, first + kChunk): thread t copies key first + t.
  const int ctx = attends ? p.context_lens[0] : 0;
  const int n_old = max(ctx - 1, 0);
  // Row (slot * num_kv_heads + kv head) of key t in the caches (t < n_old).
  const auto kv_row = [&](int t) {
    const int64_t page = p.block_tables[t / p.block_size];
    return (page * p.block_size + t % p.block_size) * nkv + kvh;
  };
  // Copies keys [first, first + kChunk) of [0, n_old) into the chunk's rows; thread t copies key
  // first + t, at cache row `row` (kv_row(first + t), read by the caller).
  const auto copy_chunk = [&](int first, int64_t row) {
    if (first + tid < n_old) {
      const __nv_bfloat16* k = p.k_cache + row * kHd;
      const __nv_bfloat16* v = p.v_cache + row * kHd;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        CpAsync16(&keys[tid * 8 + (c ^ (tid & 7))], k + c * 8, true);
        CpAsync16(&values[tid * 8 + c], v + c * 8, true);
      }
    }
    CpAsyncCommit();
  };
  // Before the wait only the first chunk's rows and an L2 prefetch of them: copies into shared
  // memory issued here queue ahead of phase A's loads of x after the wait (measured: phase A
  // ~2.7 us instead of ~1), so they are issued right after those loads.
  const int64_t first_row = attends && tid < n_old ? kv_row(tid) : 0;
  if (attends && tid < n_old) {
    PrefetchL2(p.k_cache + first_row * kHd);
    PrefetchL2(p.v_cache + first_row * kHd);
  }
  float rope_c = 1.0f, rope_s = 0.0f;
  const bool rotates = rank < nh + nkv;  // a q or k head
  if (has_slice && rotates && tid < kHd / 2) {
    RopeCosSin(p.positions[0], p.inv_freq[tid], &rope_c, &rope_s);
  }
  const int32_t slot = has_slice && !rotates ? p.slot_mapping[0] : -1;
  const int32_t k_slot = has_slice && rank >= nh && rotates ? p.slot_mapping[0] : -1;

  PdlWait();
  PdlLaunchDependents();
  // The norm before this consumer's has been read by its own consumer, which has completed.
  if (p.consumer.zero_after != nullptr && rank == 0 && tid == 0) *p.consumer.zero_after = 0;
  // Phase C's residual values and norm weights (lane 0 of each warp joins rows warp + 8 j),
  // loaded now so that their round trip overlaps phases A and B.
  float res_in[kMaxORowsPerWarp], norm_w[kMaxORowsPerWarp];
#pragma unroll
  for (int j = 0; j < kMaxORowsPerWarp; ++j) {
    const int r = warp + kWarps * j;
    const bool mine = lane == 0 && r < o_rows;
    res_in[j] = mine ? p.producer.residual[o_first + r] : 0.0f;
    norm_w[j] = mine ? p.producer.weight[o_first + r] : 0.0f;
  }

  // ---- Phase A: the block's 64 qkv rows.
  if (has_slice) {
    uint4 xv[kMaxLaneChunks];
    const uint4* x = reinterpret_cast<const uint4*>(p.x);
#pragma unroll
    for (int i = 0; i < kMaxLaneChunks; ++i) {
      const int c = lane + 32 * i;
      xv[i] = LoadCached16(x + c, c < x_chunks);
    }
    if (attends) copy_chunk(0, first_row);  // behind x's loads (asm volatile: in this order)
    float xf[kMaxLaneChunks][8];
#pragma unroll
    for (int i = 0; i < kMaxLaneChunks; ++i) UnpackBf16x8(xv[i], xf[i]);
    const float inv_rms = p.consumer.scale_by != nullptr
                              ? NormLinkInvRms(__ldcg(p.consumer.scale_by), p.consumer.eps,
                                               p.hidden)
                              : 1.0f;
    hopper::MbarWait(&bars[0], 0);
    const uint4* w = reinterpret_cast<const uint4*>(smem + lay.wqkv);
    constexpr int kRowsPerWarp = kHd / kWarps;
    float part[kRowsPerWarp];
    LaneShares(w, warp * kRowsPerWarp, 1, kRowsPerWarp, x_chunks, lane, xf, part);
    WarpSums(part);
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) sums[warp * kRowsPerWarp + j] = part[j] * inv_rms;
    }
    __syncthreads();
    if (rotates) {
      if (tid < kHd / 2) {
        const RotatedPair rot =
            RotateHalf(RoundBf16(sums[tid]), RoundBf16(sums[tid + kHd / 2]), rope_c, rope_s);
        slice[tid] = rot.lo;
        slice[tid + kHd / 2] = rot.hi;
        if (k_slot >= 0) {
          __nv_bfloat16* kc = p.k_cache + static_cast<int64_t>(k_slot) * kv_dim + (rank - nh) * kHd;
          kc[tid] = rot.lo;
          kc[tid + kHd / 2] = rot.hi;
        }
        if (p.qkv_out != nullptr) {
          p.qkv_out[rank * kHd + tid] = rot.lo;
          p.qkv_out[rank * kHd + tid + kHd / 2] = rot.hi;
        }
      }
    } else if (tid < kHd) {
      const __nv_bfloat16 v = __float2bfloat16(sums[tid]);
      slice[tid] = v;
      if (slot >= 0) {
        p.v_cache[static_cast<int64_t>(slot) * kv_dim + (rank - nh - nkv) * kHd + tid] = v;
      }
      if (p.qkv_out != nullptr) p.qkv_out[rank * kHd + tid] = v;
    }
  }
  RTGEN_TRACE_MARK(0);
  ClusterArrive();
  ClusterWait();

  // ---- Phase B: query head `rank` over its kv head's keys.
  if (attends) {
    if (tid < kHd) qf[tid] = __bfloat162float(slice[tid]) * (p.scale * kLog2e);
    const uint32_t newest_k = PeerAddr(slice, nh + kvh);
    const uint32_t newest_v = PeerAddr(slice, nh + nkv + kvh);
    float m_run = -INFINITY, l_run = 0.0f, acc = 0.0f;  // acc: thread d < 64's output dim d
    for (int first = 0; first < ctx; first += kChunk) {
      const int len = min(kChunk, ctx - first);
      if (first > 0) {
        __syncthreads();  // the previous chunk's keys, values and probabilities are read
        copy_chunk(first, first + tid < n_old ? kv_row(first + tid) : 0);
      }
      const int newest = ctx - 1 - first;  // the newest key's row, when in this chunk
      if (newest < len) {
        if (tid < 8) {
          keys[newest * 8 + (tid ^ (newest & 7))] = LoadPeer16(newest_k + tid * 16);
        } else if (tid < 16) {
          values[newest * 8 + tid - 8] = LoadPeer16(newest_v + (tid - 8) * 16);
        }
      }
      CpAsyncWait<0>();
      __syncthreads();
      float s = -INFINITY;  // base-2 score
      if (tid < len) {
        float dot[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // four chains (chunk c adds to c % 4)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          float kf[8];
          UnpackBf16x8(keys[tid * 8 + (c ^ (tid & 7))], kf);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot[c % 4] = __fmaf_rn(qf[c * 8 + e], kf[e], dot[c % 4]);
        }
        s = (dot[0] + dot[1]) + (dot[2] + dot[3]);
      }
      const float m_new = fmaxf(m_run, BlockMax(s, scratch));
      const float prob = tid < len ? exp2f(s - m_new) : 0.0f;
      probs[tid] = prob;
      const float l_chunk = BlockSum(prob, scratch);  // its barriers publish probs
      // Warp w sums keys w, w + 8, ...; lane l holds dims 2 l and 2 l + 1.
      const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(values);
      float2 oa = make_float2(0.0f, 0.0f), ob = oa;  // two chains: keys t and t + kWarps
#pragma unroll 2
      for (int t = warp; t < len; t += 2 * kWarps) {
        const float pa = probs[t];
        const float2 va = __bfloat1622float2(v2[t * (kHd / 2) + lane]);
        oa.x = __fmaf_rn(pa, va.x, oa.x);
        oa.y = __fmaf_rn(pa, va.y, oa.y);
        if (t + kWarps < len) {
          const float pb = probs[t + kWarps];
          const float2 vb = __bfloat1622float2(v2[(t + kWarps) * (kHd / 2) + lane]);
          ob.x = __fmaf_rn(pb, vb.x, ob.x);
          ob.y = __fmaf_rn(pb, vb.y, ob.y);
        }
      }
      pv[warp * kHd + 2 * lane] = oa.x + ob.x;
      pv[warp * kHd + 2 * lane + 1] = oa.y + ob.y;
      __syncthreads();
      const float rescale = exp2f(m_run - m_new);  // 0 for the first chunk
      if (tid < kHd) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) o += pv[w * kHd + tid];
        acc = acc * rescale + o;
      }
      l_run = l_run * rescale + l_chunk;
      m_run = m_new;
    }
    if (tid < kHd) {
      const __nv_bfloat16 out = __float2bfloat16(l_run > 0.0f ? acc / l_run : 0.0f);
      head_out[tid] = out;
      if (p.attn_out != nullptr) p.attn_out[rank * kHd + tid] = out;
    }
  }
  RTGEN_TRACE_MARK(1);
  ClusterArrive();
  ClusterWait();

  // ---- Phase C: the block's wo rows against every head's output, joined to the residual.
  if (tid < attn_chunks) attn[tid] = LoadPeer16(PeerAddr(head_out + (tid & 7) * 8, tid >> 3));
  ClusterArrive();  // no other block's shared memory is read after this
  __syncthreads();
  float af[kMaxLaneChunks][8];
#pragma unroll
  for (int i = 0; i < kMaxLaneChunks; ++i) {
    const int c = lane + 32 * i;
    UnpackBf16x8(c < attn_chunks ? attn[c] : make_uint4(0, 0, 0, 0), af[i]);
  }
  hopper::MbarWait(&bars[1], 0);
  const uint4* wo = reinterpret_cast<const uint4*>(smem + lay.wo);
  float prod[kMaxORowsPerWarp];  // rows warp, warp + 8, ...
  LaneShares(wo, warp, kWarps, (o_rows - warp + kWarps - 1) / kWarps, attn_chunks, lane, af, prod);
  WarpSums(prod);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxORowsPerWarp; ++j) {
    const int r = warp + kWarps * j;
    if (lane == 0 && r < o_rows) {
      const int f = o_first + r;
      sq += NormLinkJoin(p.producer, f, res_in[j], norm_w[j], prod[j]);
    }
  }
  if (lane == 0) scratch[32 + warp] = sq;
  __syncthreads();
  if (tid == 0 && o_rows > 0) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += scratch[32 + w];
    NormLinkAddSquares(p.producer, 0, total);
  }
  ClusterWait();
#else
  PdlWait();  // never launched: AttentionClusterSupported is false without sm_90a code
#endif
}

bool ShapesFit(const AttentionClusterParams& p) {
  const int nh = p.num_heads, nkv = p.num_kv_heads;
  if (p.hidden < 8 || p.hidden > kMaxHidden || p.hidden % 8 != 0) return false;
  if (nh < 1 || nkv < 1 || nh % nkv != 0 || nh + 2 * nkv > kAttentionClusterBlocks) return false;
  if (p.block_size < 1) return false;
  if (p.x == nullptr || p.wqkv == nullptr || p.wo == nullptr || p.k_cache == nullptr ||
      p.v_cache == nullptr || p.positions == nullptr || p.inv_freq == nullptr ||
      p.slot_mapping == nullptr || p.block_tables == nullptr || p.context_lens == nullptr) {
    return false;
  }
  if (!Aligned16(p.x) || !Aligned16(p.wqkv) || !Aligned16(p.wo) || !Aligned16(p.k_cache) ||
      !Aligned16(p.v_cache)) {
    return false;
  }
  if (!p.producer.producer_complete()) return false;
  const GemvNormLink& in = p.consumer;
  return in.zero_after == nullptr || in.zero_after != in.scale_by;
}

// The launch of one cluster with `smem` bytes of dynamic shared memory on `stream`, as a
// programmatic dependent when `pdl`; its attributes are written to `attr`.
cudaLaunchConfig_t ClusterLaunch(size_t smem, cudaStream_t stream, bool pdl,
                                 cudaLaunchAttribute (&attr)[2]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kAttentionClusterBlocks);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kAttentionClusterBlocks;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 2 : 1;
  return cfg;
}

// Whether the current device runs the kernel with `smem` bytes of dynamic shared memory (once
// per device and size: the attributes set here are per process).
bool DeviceRuns(size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, size_t>, bool> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find({device, smem});
  if (it != known.end()) return it->second;
  bool ok = HopperDeviceCodeRuns(device);
  int optin = 0;
  ok = ok && cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
                 cudaSuccess;
  ok = ok && cudaFuncSetAttribute(AttentionClusterKernel,
                                  cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
  // The limit is per process and per kernel, not per launch: set to the device's largest (less
  // the kernel's static shared memory, which trace builds have: asking for the whole opt-in
  // size there was refused, and with it every launch), so that a later size cannot lower it
  // under an earlier one's launches. `smem` must fit under it.
  cudaFuncAttributes attrs = {};
  ok = ok && cudaFuncGetAttributes(&attrs, AttentionClusterKernel) == cudaSuccess;
  const int dynamic_max = optin - static_cast<int>(attrs.sharedSizeBytes);
  ok = ok && dynamic_max >= 0 && static_cast<size_t>(dynamic_max) >= smem &&
       cudaFuncSetAttribute(AttentionClusterKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            dynamic_max) == cudaSuccess;
  if (ok) {
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = ClusterLaunch(smem, nullptr, false, attr);
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, AttentionClusterKernel, &cfg) == cudaSuccess &&
         clusters >= 1;
  }
  cudaGetLastError();  // a failed query is an answer (no), not an error to pass on
  known[{device, smem}] = ok;
  return ok;
}

}  // namespace

size_t AttentionClusterSmemBytes(int32_t hidden, int32_t num_heads) {
  return static_cast<size_t>(SmemLayout(hidden, num_heads).total);
}

bool AttentionClusterSupported(const AttentionClusterParams& p) {
  return ShapesFit(p) && DeviceRuns(AttentionClusterSmemBytes(p.hidden, p.num_heads));
}

cudaError_t AttentionCluster(const AttentionClusterParams& params, cudaStream_t stream) {
  if (!AttentionClusterSupported(params)) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg =
      ClusterLaunch(AttentionClusterSmemBytes(params.hidden, params.num_heads), stream,
                    PdlEnabled(), attr);
  return cudaLaunchKernelEx(&cfg, AttentionClusterKernel, params);
}

}  // namespace rtgen::kernels
