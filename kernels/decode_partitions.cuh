#pragma once
// Key partitions of paged decode attention (DecodeAttentionParams::num_splits > 1) and the merge
// of their partials by the last partition block to finish, shared by the CUDA-core and the
// tensor-core decode kernels. Device code only.

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/decode_attention.h"
#include "kernels/device_utils.cuh"

namespace rtgen::kernels {

// Keys per partition of a sequence of ctx keys cut into at most num_splits partitions: the
// smallest multiple of `granule` that covers ctx in num_splits partitions. Sized from the
// sequence's own length, so every partition of a short context holds keys (one launch
// configuration serves every length).
__device__ __forceinline__ int PartitionKeys(int ctx, int num_splits, int granule) {
  const int per = (ctx + num_splits - 1) / num_splits;
  return max(granule, (per + granule - 1) / granule * granule);
}

// Partitions of a sequence that hold keys (0 for an empty context).
__device__ __forceinline__ int HeldPartitions(int ctx, const DecodeAttentionParams& p) {
  if (p.num_splits == 1) return ctx > 0 ? 1 : 0;
  const int keys = PartitionKeys(ctx, p.num_splits, p.partition_size);
  return (ctx + keys - 1) / keys;
}

// Called by every thread of a partition block after it has written its partials: true in the
// one block (of the `parts` sharing *counter) that arrives last, which then resets the counter
// for the next launch. `s_flag`: one shared int.
__device__ __forceinline__ bool ArrivesLast(int* counter, int parts, int* s_flag) {
  __threadfence();  // this block's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    const int last = atomicAdd(counter, 1) == parts - 1;
    if (last) *counter = 0;
    *s_flag = last;
  }
  __syncthreads();
  const bool last = *s_flag != 0;
  if (last) __threadfence();
  return last;
}

// Merges the `parts` partitions of query heads head0 .. head0 + nh - 1 of sequence seq into
// p.out, with the same arithmetic and order as DecodeCombineKernel (so the result does not
// depend on which block merges). Every thread of the block calls it; s_cm and s_cinv hold nh
// floats.
template <int kThreads>
__device__ __forceinline__ void MergePartitions(const DecodeAttentionParams& p, int seq, int head0,
                                                int nh, int parts, int hd, float* s_cm,
                                                float* s_cinv) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t first0 = (static_cast<int64_t>(seq) * p.num_heads + head0) * p.num_splits;
  for (int g = warp; g < nh; g += kWarps) {  // warp w: the weights of heads head0 + w + k kWarps
    const float* ml = p.partial_ml + (first0 + static_cast<int64_t>(g) * p.num_splits) * 2;
    float mx = -INFINITY;
    for (int s = lane; s < parts; s += 32) mx = fmaxf(mx, __ldcg(ml + 2 * s));
    mx = WarpMax(mx);
    float lsum = 0.0f;
    for (int s = lane; s < parts; s += 32) {
      lsum += exp2f(__ldcg(ml + 2 * s) - mx) * __ldcg(ml + 2 * s + 1);
    }
    lsum = WarpSum(lsum);
    if (lane == 0) {
      s_cm[g] = mx;
      s_cinv[g] = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < nh * hd; idx += kThreads) {
    const int g = idx / hd, d = idx % hd;
    const int64_t first = first0 + static_cast<int64_t>(g) * p.num_splits;
    const float* ml = p.partial_ml + first * 2;
    const float* po = p.partial_out + first * hd;
    float acc = 0.0f;
    for (int s = 0; s < parts; ++s) {
      acc = fmaf(exp2f(__ldcg(ml + 2 * s) - s_cm[g]), __ldcg(po + s * hd + d), acc);
    }
    p.out[(static_cast<int64_t>(seq) * p.num_heads + head0 + g) * hd + d] =
        __float2bfloat16(acc * s_cinv[g]);
  }
}

}  // namespace rtgen::kernels
