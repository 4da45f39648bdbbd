#pragma once
// Decode attention's key partitions, host code without CUDA (built everywhere, so the CPU-only CI
// tests it: tests/kernels_host): how many partitions of how many keys a decode step's attention
// uses, the context classes decode graphs are captured for, and whether the o projection merges
// the partitions as it reads its input (gemv.h GemvMergedInput) instead of attention itself.
// C++17: decode_attention.cu, compiled as C++17, includes it.

#include <cstdint>
#include <vector>

namespace rtgen::kernels {

// Split plan: how many partitions to use for `num_seqs` sequences of up to `max_context`
// tokens with `num_kv_heads` kv heads on a device with `num_sms` multiprocessors: about one
// block per SM, partitions of at least (a multiple of) `min_partition` keys, 1 when
// num_seqs * num_kv_heads fills the GPU.
struct DecodeSplitPlan {
  int32_t num_splits = 1;
  int32_t partition_size = 0;  // the granule (DecodeAttentionParams::partition_size)
};
constexpr int32_t kDefaultMinPartition = 256;
DecodeSplitPlan PlanDecodeSplits(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context,
                                 int32_t num_sms, int32_t min_partition = kDefaultMinPartition);

// Who merges a one-sequence decode step's key partitions. kAuto: the o projection where kAuto's
// rule (below) holds, else attention. kAlways: the o projection wherever the
// plain plan has 2..kMaxSplitsMergedInO partitions. kNever: attention (its last block).
// RTGEN_DECODE_MERGE_IN_O: unset kAuto, "1" kAlways, "0" kNever (A/B).
enum class MergeInO { kAuto, kAlways, kNever };
MergeInO MergeInOFromEnv();

// The most partitions the o projection merges: every one of its blocks reads all of them (four
// at a time), so a long context's many partitions stay with attention.
constexpr int32_t kMaxSplitsMergedInO = 8;
// kAuto's rule: one sequence, an o projection input (num_heads * head_dim) of at most
// kMergeInOMaxInput elements, and partitions of kMergeInOPartition keys where that plan has
// 2..kMaxSplitsMergedInO of them. Short partitions pay only where attention does not merge them
// itself. Measured on the H200 (session 51, graph TPOT, prompt 128, 64 steps): SmolLM2-135M b1
// (input 576) 0.421 ms → 0.413 with the o projection merging 64-key partitions, 0.498 with
// attention merging them; Llama-3.2-1B b1 (input 2048) 0.777 → 0.80 with them.
constexpr int32_t kMergeInOMaxInput = 1024;
constexpr int32_t kMergeInOPartition = 64;

// What a decode step's plan depends on besides its longest context.
struct DecodeShape {
  int32_t num_seqs = 1;
  int32_t num_kv_heads = 1;
  int32_t o_input = 0;      // num_heads * head_dim: the o projection's input elements
  int32_t num_sms = 1;
  int32_t min_partition = kDefaultMinPartition;  // the plain plan's granule (keys)
  MergeInO merge = MergeInO::kAuto;
};
struct DecodeStepPlan {
  DecodeSplitPlan split;
  // The o projection is to merge the partitions (2..kMaxSplitsMergedInO of them, one sequence);
  // where its GEMV cannot (matmul.h MatmulTakesMergedInput), attention merges them after all.
  bool merged_in_o = false;
};
// The plan of a step of `shape` whose longest context is at most context_bound.
DecodeStepPlan PlanDecodeStep(const DecodeShape& shape, int32_t context_bound);
// Context classes of decode steps of `shape`: increasing bounds, the last max_context, bound c
// standing for a longest context in (previous bound, c] and planned as PlanDecodeStep(shape, c).
// The candidates are the smallest granule the shape can take (min_partition, or
// kMergeInOPartition where kAuto's rule applies), twice that, four times, ... below max_context,
// then max_context; of consecutive candidates with the same plan (partitions, granule and who
// merges) the largest is kept. A step of short contexts planned for max_context launches
// partitions that hold no keys; their blocks cost the step time (decode graphs are captured per
// class: graph_runner.h).
std::vector<int32_t> DecodeStepContextBounds(const DecodeShape& shape, int32_t max_context);
// The first of `bounds` (increasing, not empty) that is >= longest; the last when none is.
int32_t DecodeContextBoundFor(const std::vector<int32_t>& bounds, int32_t longest);

}  // namespace rtgen::kernels
