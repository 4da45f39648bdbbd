#pragma once
// Paged attention for decode: one query token per sequence (GQA: query head h reads kv head
// h / (num_heads / num_kv_heads)). Sequence s attends to its first context_lens[s] positions
// (read from device memory, so one launch configuration serves every length; 0 gives zeros).
// With num_splits > 1 each sequence's keys are cut into at most num_splits partitions of
// K keys, K the smallest multiple of partition_size that covers its context length in
// num_splits partitions (so a short context still spreads over several blocks); each partition
// is written as a partial (max, sum, unnormalised output) to the workspace, then combined; only
// the partitions holding keys are written and combined.
// Requires head_dim % 8 == 0, q_stride % 8 == 0 and 16-byte aligned q, k_cache and v_cache
// (q and K/V rows are read with 16-byte loads); one block serves all query heads of a kv head
// (up to 8 on CUDA cores, up to 16 on tensor cores), so K/V are read once per group. With
// `tensor_cores`, head_dim 64 and 128 (split or not) run on tensor cores
// (decode_attention_mma.h); everything else on CUDA cores.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/decode_plan.h"  // the split plan and context classes

namespace rtgen::kernels {

struct DecodeAttentionParams {
  const __nv_bfloat16* q = nullptr;      // sequence s, head h at q + s * q_stride + h * head_dim
  int64_t q_stride = 0;
  const __nv_bfloat16* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const __nv_bfloat16* v_cache = nullptr;
  const int32_t* block_tables = nullptr;   // [num_seqs, max_blocks_per_seq]
  const int32_t* context_lens = nullptr;   // [num_seqs]
  __nv_bfloat16* out = nullptr;            // [num_seqs, num_heads * head_dim]
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                    // <= 256, a multiple of 8
  int32_t block_size = 0;
  int32_t max_blocks_per_seq = 0;
  float scale = 1.0f;                      // softmax scale, usually 1 / sqrt(head_dim)
  int32_t num_splits = 1;                  // partitions per sequence (grid size; fixed per graph)
  int32_t partition_size = 0;              // granule of a partition's keys when num_splits > 1
  float* partial_out = nullptr;            // [num_seqs, num_heads, num_splits, head_dim]
  float* partial_ml = nullptr;             // [num_seqs, num_heads, num_splits, 2] (base-2 max, sum)
  // Optional, [num_seqs * num_heads] zeros before the first launch (each launch leaves them
  // zero). When set, the partitions are merged inside the attention kernel by the last block of
  // each (sequence, kv head) to finish, and a sequence with keys in at most one partition is
  // written directly: no separate combine launch. Null: a combine kernel is launched.
  int32_t* counters = nullptr;
  // With num_splits > 1 and no counters: every partition holding keys leaves its partials for
  // the next kernel to merge as it reads them (gemv.h GemvMergedInput), so neither this kernel
  // nor a combine launch writes `out`. With one partition `out` is written as ever.
  bool merged_by_consumer = false;
  // False: always the CUDA-core kernel (tests, and A/B through RTGEN_DECODE_MMA=0).
  bool tensor_cores = true;
  // The tensor-core kernel copies its first K/V tiles before its PDL wait, all but each
  // sequence's newest key (context_lens[s] - 1): that one (and q) is what the kernel before it
  // writes in a decode step; every other key must have been written by work that has completed
  // before that kernel started (earlier steps). False: everything after the wait.
  bool prefetch_kv = false;
  // Optional (on(): positions set; the tensor-core kernel only, and not with prefetch_kv,
  // DecodeAttention refuses it otherwise): RoPE and the KV store of each sequence's newest key
  // done here instead of by a launch before, so the qkv projection before this kernel writes
  // nothing but its rows. q is read unrotated and rotated at positions[s] as it is loaded; the
  // block holding key context_lens[s] - 1 rotates that key's row of new_k, stores it and new_v's
  // row at cache slot slot_mapping[s] and attends to them (slot -1: nothing stored, the key read
  // from the cache, as RopeKvStore skips it). The same arithmetic as RopeKvStore (rope_math.cuh),
  // so the same bits. new_k, new_v and the caches: 16-byte aligned; new rows q_stride apart.
  struct RopeStore {
    const __nv_bfloat16* new_k = nullptr;   // sequence s's kv heads at new_k + s * q_stride
    const __nv_bfloat16* new_v = nullptr;   // same layout
    const int32_t* positions = nullptr;     // [num_seqs]
    const float* inv_freq = nullptr;        // [head_dim / 2]
    const int32_t* slot_mapping = nullptr;  // [num_seqs]
    __nv_bfloat16* k_cache = nullptr;       // where the newest keys are written (k_cache's
    __nv_bfloat16* v_cache = nullptr;       // and v_cache's memory)
    bool on() const { return positions != nullptr; }
  };
  RopeStore rope;
};

cudaError_t DecodeAttention(DecodeAttentionParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
