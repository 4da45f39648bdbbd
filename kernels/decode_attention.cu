#include <algorithm>
#include <cstdint>

#include "kernels/decode_attention.h"
#include "kernels/decode_attention_mma.h"
#include "kernels/decode_partitions.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

// One block per (kv head [x query-head chunk], sequence, partition) serves every query head of
// the GQA group, so each K/V row is read once per group. The block's threads form lane groups of
// kLanes lanes; a lane group scores one key at a time, each lane holding 8 dims (one 16-byte load
// of the K row and one of the V row). Lane groups stride over the keys with their own online
// softmax (base-2: q carries scale * log2(e)); the groups are merged with warp shuffles, then the
// warps through shared memory.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;         // bf16 per 16-byte load
constexpr int kUnroll = 4;      // keys in flight per lane group
constexpr int kMaxHeadDim = 256;

// kLanes: lanes per key (head_dim <= 8 * kLanes). kGroup: most query heads one block serves.
// grid (num_kv_heads * ceil(group / kGroup), num_seqs, num_splits). Two blocks per SM where the
// group is small (caps registers at 128: the kernel needs ~100 then, without spills).
template <int kLanes, int kGroup>
__global__ void __launch_bounds__(kThreads, kGroup <= 4 ? 2 : 1)
    DecodeAttentionKernel(DecodeAttentionParams p) {
  RTGEN_TRACE_KERNEL(kDecodeAttention);
  constexpr int kKeysPerPass = kThreads / kLanes;
  constexpr int kStep = kKeysPerPass * kUnroll;
  // Each warp's output rescaled to the block max, summed over warps in warp order: at most
  // 32 KB (kLanes * kVec = the largest head_dim of this instance).
  static_assert(kWarps * kGroup * kLanes * kVec * sizeof(float) <= 32 * 1024);
  __shared__ float s_m[kWarps][kGroup];
  __shared__ float s_part[kWarps][kGroup][kLanes * kVec];
  __shared__ float s_lpart[kWarps][kGroup];
  __shared__ int32_t s_table[kPartitionTableCache];

  const int seq = blockIdx.y, split = blockIdx.z;
  // Before the PDL wait (step arrays, written by no kernel): the context length and this
  // partition's block-table entries, so the key loop resolves slots from shared memory and each
  // step costs one memory round trip (K and V), not two (table, then K and V).
  PartitionRange range;
  const PartitionRole role = EnterPartition<kThreads>(p, seq, split, s_table, &range);
  if (role.skip) return;
  const int begin = range.begin, end = range.end;

  const int group = p.num_heads / p.num_kv_heads;
  const int chunks = (group + kGroup - 1) / kGroup;
  const int kv_head = blockIdx.x / chunks;
  const int chunk = blockIdx.x % chunks;
  const int head0 = kv_head * group + chunk * kGroup;
  const int nh = min(kGroup, group - chunk * kGroup);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = threadIdx.x % kLanes;        // this lane's 8 dims: [d0, d0 + 8)
  const int key_slot = threadIdx.x / kLanes;   // lane group
  const int hd = p.head_dim;
  const int d0 = sub * kVec;
  const bool dim_ok = d0 < hd;

  float q[kGroup][kVec];
  const __nv_bfloat16* qp = p.q + seq * p.q_stride + static_cast<int64_t>(head0) * hd + d0;
  const float qscale = p.scale * kLog2e;
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const uint4 u = LoadCached16(reinterpret_cast<const uint4*>(qp + g * hd), g < nh && dim_ok);
    UnpackBf16x8(u, q[g]);  // zeros past the group
#pragma unroll
    for (int i = 0; i < kVec; ++i) q[g][i] *= qscale;
  }
  float m[kGroup], l[kGroup], acc[kGroup][kVec];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[g][i] = 0.0f;
  }

  const int64_t row = static_cast<int64_t>(p.num_kv_heads) * hd;  // elements per cache slot
  const __nv_bfloat16* kbase = p.k_cache + static_cast<int64_t>(kv_head) * hd + d0;
  const __nv_bfloat16* vbase = p.v_cache + static_cast<int64_t>(kv_head) * hd + d0;

  // Block-uniform loop so the lane-group shuffles below never diverge.
  for (int kb = begin; kb < end; kb += kStep) {
    uint4 kr[kUnroll], vr[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int key = kb + key_slot + u * kKeysPerPass;
      ok[u] = key < end;
      kr[u] = make_uint4(0, 0, 0, 0);
      vr[u] = make_uint4(0, 0, 0, 0);
      if (ok[u] && dim_ok) {
        const int64_t slot = range.Slot(key, p.block_size, s_table);
        kr[u] = *reinterpret_cast<const uint4*>(kbase + slot * row);
        vr[u] = *reinterpret_cast<const uint4*>(vbase + slot * row);
      }
    }
    float s[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kVec];
      UnpackBf16x8(kr[u], kf);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot = fmaf(q[g][i], kf[i], dot);
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(kFullMask, dot, o);
        s[u][g] = ok[u] ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float mx = s[0][g];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
      const float mn = fmaxf(m[g], mx);
      const float alpha = mn == -INFINITY ? 1.0f : Rescale(m[g], mn);
      l[g] *= alpha;
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[g][i] *= alpha;
      m[g] = mn;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kVec];
      UnpackBf16x8(vr[u], vf);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float pr = ok[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
        l[g] += pr;
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[g][i] = fmaf(pr, vf[i], acc[g][i]);
      }
    }
  }

  // Merge the lane groups of each warp (lanes with the same `sub` hold the same dims).
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const float mo = __shfl_xor_sync(kFullMask, m[g], o);
      const float lo = __shfl_xor_sync(kFullMask, l[g], o);
      const float mn = fmaxf(m[g], mo);
      const float a = Rescale(m[g], mn), b = Rescale(mo, mn);
      l[g] = l[g] * a + lo * b;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        acc[g][i] = acc[g][i] * a + __shfl_xor_sync(kFullMask, acc[g][i], o) * b;
      }
      m[g] = mn;
    }
  }
  // Merge the warps: each rescales its output to the block max into its own slice of shared
  // memory, then the sums over warps are taken in warp order (a fixed order, so a graph replay
  // is bitwise equal to an eager run). Two barriers whatever the warp count.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) s_m[warp][g] = m[g];
  }
  __syncthreads();
  if (lane < kLanes) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float bm = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, s_m[w][g]);
      const float f = Rescale(m[g], bm);
      if (dim_ok) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) s_part[warp][g][d0 + i] = acc[g][i] * f;
      }
      if (lane == 0) s_lpart[warp][g] = l[g] * f;
    }
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < nh * hd; idx += kThreads) {
    const int g = idx / hd, d = idx % hd;
    const int64_t head = head0 + g;
    float sum = 0.0f, lg = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      sum += s_part[w][g][d];
      lg += s_lpart[w][g];
    }
    StoreResult(p, seq * p.num_heads + head, split, hd, d, role.direct, sum, lg, [&] {
      float bm = -INFINITY;
      for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, s_m[w][g]);
      return bm;  // base-2 max of the partition's scores
    });
  }
  MergeIfLast<kThreads, kGroup>(p, seq, head0, nh, hd, role);
}

// grid (num_heads, num_seqs); dynamic shared memory: num_splits floats. Merges the partitions
// that hold keys (those below the sequence's context length; a context of 0 gives zeros).
__global__ void DecodeCombineKernel(DecodeAttentionParams p) {
  RTGEN_TRACE_KERNEL(kDecodeCombine);
  extern __shared__ float s_w[];
  __shared__ float s_inv_l;
  PdlWait();
  PdlLaunchDependents();
  const int head = blockIdx.x, seq = blockIdx.y;
  const int ctx = p.context_lens[seq];
  const int n = HeldPartitions(ctx, p);
  const int64_t first = (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits;
  const float* ml = p.partial_ml + first * 2;
  if (threadIdx.x < 32) {
    float m = -INFINITY;
    for (int s = threadIdx.x; s < n; s += 32) m = fmaxf(m, ml[2 * s]);
    m = WarpMax(m);
    float l = 0.0f;
    for (int s = threadIdx.x; s < n; s += 32) {
      const float w = exp2f(ml[2 * s] - m);
      s_w[s] = w;
      l += w * ml[2 * s + 1];
    }
    l = WarpSum(l);
    if (threadIdx.x == 0) s_inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  const float* po = p.partial_out + first * p.head_dim;
  __nv_bfloat16* out = p.out + (static_cast<int64_t>(seq) * p.num_heads + head) * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < n; ++s) acc = fmaf(s_w[s], po[s * p.head_dim + d], acc);
    out[d] = __float2bfloat16(acc * s_inv_l);
  }
}

template <int kLanes>
cudaError_t LaunchAttention(const DecodeAttentionParams& p, int group, cudaStream_t stream) {
  // Query heads in chunks of 4 where the group is small or head_dim > 128 (8 heads of 256 dims
  // would need 64 KB of warp partials), else of 8.
  if (group <= 4 || kLanes == 32) {
    const dim3 grid(p.num_kv_heads * ((group + 3) / 4), p.num_seqs, p.num_splits);
    return LaunchKernel(DecodeAttentionKernel<kLanes, 4>, grid, kThreads, 0, stream, p);
  }
  if constexpr (kLanes < 32) {
    const dim3 grid(p.num_kv_heads * ((group + 7) / 8), p.num_seqs, p.num_splits);
    return LaunchKernel(DecodeAttentionKernel<kLanes, 8>, grid, kThreads, 0, stream, p);
  }
  return cudaErrorInvalidValue;  // unreachable
}

}  // namespace

cudaError_t DecodeAttention(DecodeAttentionParams p, cudaStream_t stream) {
  if (p.num_seqs <= 0) return cudaSuccess;
  const auto misaligned = [](const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 != 0;
  };
  if (p.head_dim <= 0 || p.head_dim > kMaxHeadDim || p.head_dim % kVec != 0 ||
      p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 || p.num_splits < 1 ||
      (p.num_splits > 1 && p.partition_size <= 0) || p.block_size <= 0 ||
      misaligned(p.q) || p.q_stride % kVec != 0 || misaligned(p.k_cache) ||
      misaligned(p.v_cache) || (p.merged_by_consumer && p.counters != nullptr)) {
    return cudaErrorInvalidValue;
  }
  const auto aligned = [&](const void* ptr) { return ptr != nullptr && !misaligned(ptr); };
  if (p.rope.on() &&
      (!DecodeAttentionMmaSupports(p) || p.prefetch_kv || !aligned(p.rope.new_k) ||
       !aligned(p.rope.new_v) || !aligned(p.rope.k_cache) || !aligned(p.rope.v_cache) ||
       p.rope.inv_freq == nullptr || p.rope.slot_mapping == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const int group = p.num_heads / p.num_kv_heads;
  cudaError_t err;
  if (DecodeAttentionMmaSupports(p)) {
    err = DecodeAttentionMma(p, stream);
  } else if (p.head_dim <= 32) {
    err = LaunchAttention<4>(p, group, stream);
  } else if (p.head_dim <= 64) {
    err = LaunchAttention<8>(p, group, stream);
  } else if (p.head_dim <= 128) {
    err = LaunchAttention<16>(p, group, stream);
  } else {
    err = LaunchAttention<32>(p, group, stream);
  }
  if (err != cudaSuccess || p.num_splits == 1 || p.counters != nullptr || p.merged_by_consumer) {
    return err;
  }
  const int threads = std::min(256, (p.head_dim + 31) / 32 * 32);
  return LaunchKernel(DecodeCombineKernel, dim3(p.num_heads, p.num_seqs), threads,
                      p.num_splits * sizeof(float), stream, p);
}

}  // namespace rtgen::kernels
