#pragma once
// Key partitions of paged decode attention (DecodeAttentionParams::num_splits > 1) and the merge
// of their partials by the last partition block to finish, shared by the CUDA-core and the
// tensor-core decode kernels. Device code only.

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/decode_attention.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.h"

namespace rtgen::kernels {

constexpr int kPartitionTableCache = 512;  // block-table entries of a partition kept in smem

// Keys per partition of a sequence of ctx keys cut into at most num_splits partitions: the
// smallest multiple of `granule` that covers ctx in num_splits partitions. Sized from the
// sequence's own length, so every partition of a short context holds keys (one launch
// configuration serves every length).
__device__ __forceinline__ int PartitionKeys(int ctx, int num_splits, int granule) {
  const int per = (ctx + num_splits - 1) / num_splits;
  return max(granule, (per + granule - 1) / granule * granule);
}

// Partitions of a sequence of ctx keys that hold keys (0 for an empty context), of a plan of
// num_splits partitions of `granule`-key multiples.
__device__ __forceinline__ int HeldPartitionsOf(int ctx, int num_splits, int granule) {
  if (num_splits == 1) return ctx > 0 ? 1 : 0;
  const int keys = PartitionKeys(ctx, num_splits, granule);
  return (ctx + keys - 1) / keys;
}
__device__ __forceinline__ int HeldPartitions(int ctx, const DecodeAttentionParams& p) {
  return HeldPartitionsOf(ctx, p.num_splits, p.partition_size);
}

// The keys [begin, end) of sequence `seq` that partition `split` holds, and where its slots
// come from: shared memory (`cached`: entries first_block .. of the sequence's block table) or
// the table itself.
struct PartitionRange {
  int ctx = 0;
  int begin = 0;
  int end = 0;
  int first_block = 0;
  bool cached = false;
  int shift = -1;  // log2(block_size) where it is a power of two (shifts), else -1 (divisions)
  const int32_t* table = nullptr;  // the sequence's block-table row

  // The cache slot of key `key` (begin <= key < end).
  __device__ __forceinline__ int64_t Slot(int key, int block_size, const int32_t* s_table) const {
    const int page = shift >= 0 ? key >> shift : key / block_size;
    const int in_page = shift >= 0 ? key & (block_size - 1) : key % block_size;
    const int32_t block = cached ? s_table[page - first_block] : table[page];
    return static_cast<int64_t>(block) * block_size + in_page;
  }
};

// Reads the context length and caches the partition's block-table entries (up to
// kPartitionTableCache, else none) in s_table, which holds kPartitionTableCache entries; step
// arrays only, so it runs before the PDL wait. Contains a barrier: every thread of the block
// calls it.
template <int kThreads>
__device__ __forceinline__ PartitionRange LoadPartition(const DecodeAttentionParams& p, int seq,
                                                        int split, int32_t* s_table) {
  PartitionRange r;
  r.ctx = p.context_lens[seq];
  const int keys =
      p.num_splits > 1 ? PartitionKeys(r.ctx, p.num_splits, p.partition_size) : r.ctx;
  r.begin = split * keys;
  r.end = min(r.ctx, r.begin + keys);
  r.table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  r.first_block = r.begin / p.block_size;
  r.shift = (p.block_size & (p.block_size - 1)) == 0 ? __ffs(p.block_size) - 1 : -1;
  const int len = r.end > r.begin ? (r.end - 1) / p.block_size - r.first_block + 1 : 0;
  r.cached = len <= kPartitionTableCache;
  if (r.cached) {
    for (int j = threadIdx.x; j < len; j += kThreads) s_table[j] = r.table[r.first_block + j];
  }
  __syncthreads();
  return r;
}

// What a partition block writes: `direct` output (no splits, or with in-kernel merging a sequence
// whose keys fit one partition: partition 0 writes it, zeros for an empty context), or partials;
// `skip`: nothing (an empty partition: the merge reads only partitions below ctx).
struct PartitionRole {
  int parts = 0;  // partitions of the sequence that hold keys
  bool direct = false;
  bool skip = false;
};

__device__ __forceinline__ PartitionRole RoleOf(const DecodeAttentionParams& p,
                                                const PartitionRange& r, int split) {
  PartitionRole role;
  role.parts = HeldPartitions(r.ctx, p);
  role.direct = p.num_splits == 1 || (p.counters != nullptr && role.parts <= 1);
  role.skip = p.num_splits > 1 && r.begin >= r.end && !(role.direct && split == 0);
  return role;
}

// Stores element d of the result for output row `row` (seq * num_heads + query head): the
// normalised output when `direct`, else this partition's partial: `sum` (the output rescaled to
// the block max) and, with d == 0, that max (block_max(), base 2) and the sum `l`.
template <typename BlockMax>
__device__ __forceinline__ void StoreResult(const DecodeAttentionParams& p, int64_t row, int split,
                                            int hd, int d, bool direct, float sum, float l,
                                            BlockMax block_max) {
  if (direct) {
    p.out[row * hd + d] = __float2bfloat16(l > 0.0f ? sum / l : 0.0f);
    return;
  }
  const int64_t part = row * p.num_splits + split;
  p.partial_out[part * hd + d] = sum;
  if (d == 0) {
    p.partial_ml[part * 2] = block_max();
    p.partial_ml[part * 2 + 1] = l;
  }
}

// A partition block's start: its range (LoadPartition: step arrays only, before the PDL wait),
// then the wait and the release of the next kernel (launch.h: every thread waits, before any
// early return), then its role; the caller returns at once when role.skip.
template <int kThreads>
__device__ __forceinline__ PartitionRole EnterPartition(const DecodeAttentionParams& p, int seq,
                                                        int split, int32_t* s_table,
                                                        PartitionRange* range) {
  *range = LoadPartition<kThreads>(p, seq, split, s_table);
  PdlWait();
  PdlLaunchDependents();
  return RoleOf(p, *range, split);
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

// After every result of the block is stored: with in-kernel merging (counters) and partials, the
// last partition block of this (sequence, blockIdx.x) to finish merges the query heads
// head0 .. head0 + nh - 1 (nh <= kMaxHeads). Every thread of the block calls it.
template <int kThreads, int kMaxHeads>
__device__ __forceinline__ void MergeIfLast(const DecodeAttentionParams& p, int seq, int head0,
                                            int nh, int hd, const PartitionRole& role) {
  if (role.direct || p.counters == nullptr) return;
  __shared__ int s_last;
  __shared__ float s_cm[kMaxHeads], s_cinv[kMaxHeads];
  int* counter = p.counters + static_cast<int64_t>(seq) * gridDim.x + blockIdx.x;
  if (!ArrivesLast(counter, role.parts, &s_last)) return;
  MergePartitions<kThreads>(p, seq, head0, nh, role.parts, hd, s_cm, s_cinv);
}

}  // namespace rtgen::kernels
