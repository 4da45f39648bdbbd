#include "kernels/decode_plan.h"

#include <algorithm>
#include <cstdlib>

#include "kernels/env_switch.h"

namespace rtgen::kernels {

DecodeSplitPlan PlanDecodeSplits(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context,
                                 int32_t num_sms, int32_t min_partition) {
  // Only as many partitions as it takes to give the GPU about one block per SM (a batch that
  // already covers the SMs is not split), and no more than max_context / min_partition.
  // RTGEN_DECODE_SPLITS=N (A/B): N partitions at every batch size (at most `most`). Measured on
  // the H200 (session 19, graph TPOT, 128 steps): Llama-3-8B b64 5.29-5.37 ms unsplit, 5.66-5.67
  // with 2 partitions of 64-key granules, 5.85-5.86 with 3 of 32: more blocks than fit at once.
  static const int64_t forced = EnvIntIn("RTGEN_DECODE_SPLITS", 0, 65536, 0);  // 0: automatic
  DecodeSplitPlan plan;
  const int64_t units = std::max<int64_t>(1, int64_t{num_seqs} * num_kv_heads);
  if (min_partition <= 0 || max_context <= min_partition) return plan;
  const int64_t want = forced > 0 ? forced : num_sms / units;
  const int64_t most = (max_context + min_partition - 1) / min_partition;
  plan.num_splits = static_cast<int32_t>(std::max<int64_t>(1, std::min(want, most)));
  if (plan.num_splits > 1) plan.partition_size = min_partition;
  return plan;
}

int32_t DecodeContextBoundFor(const std::vector<int32_t>& bounds, int32_t longest) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), longest);
  return it == bounds.end() ? bounds.back() : *it;
}

MergeInO MergeInOFromEnv() {
  switch (EnvChoice("RTGEN_DECODE_MERGE_IN_O", {"0", "1"})) {
    case 0: return MergeInO::kNever;
    case 1: return MergeInO::kAlways;
    default: return MergeInO::kAuto;
  }
}

namespace {

bool SamePlan(const DecodeStepPlan& a, const DecodeStepPlan& b) {
  return a.split.num_splits == b.split.num_splits &&
         a.split.partition_size == b.split.partition_size && a.merged_in_o == b.merged_in_o;
}

bool MergeableSplits(const DecodeSplitPlan& plan) {
  return plan.num_splits >= 2 && plan.num_splits <= kMaxSplitsMergedInO;
}

bool AutoMergeRule(const DecodeShape& shape) {
  return shape.merge == MergeInO::kAuto && shape.num_seqs == 1 &&
         shape.o_input <= kMergeInOMaxInput;
}

}  // namespace

DecodeStepPlan PlanDecodeStep(const DecodeShape& shape, int32_t context_bound) {
  DecodeStepPlan plan;
  if (AutoMergeRule(shape)) {
    const DecodeSplitPlan short_parts = PlanDecodeSplits(
        shape.num_seqs, shape.num_kv_heads, context_bound, shape.num_sms, kMergeInOPartition);
    if (MergeableSplits(short_parts)) return {short_parts, true};
  }
  plan.split = PlanDecodeSplits(shape.num_seqs, shape.num_kv_heads, context_bound,
                                shape.num_sms, shape.min_partition);
  plan.merged_in_o =
      shape.merge == MergeInO::kAlways && shape.num_seqs == 1 && MergeableSplits(plan.split);
  return plan;
}

std::vector<int32_t> DecodeStepContextBounds(const DecodeShape& shape, int32_t max_context) {
  const int32_t first = std::max(
      1, AutoMergeRule(shape) ? std::min(kMergeInOPartition, shape.min_partition)
                              : shape.min_partition);
  std::vector<int32_t> candidates;
  for (int64_t c = first; c < max_context; c *= 2) candidates.push_back(static_cast<int32_t>(c));
  candidates.push_back(max_context);
  std::vector<int32_t> bounds;
  DecodeStepPlan previous;  // the last candidate's plan
  for (const int32_t c : candidates) {
    const DecodeStepPlan plan = PlanDecodeStep(shape, c);
    if (!bounds.empty() && SamePlan(plan, previous)) {
      bounds.back() = c;  // the same plan: the larger bound stands for both
    } else {
      bounds.push_back(c);
    }
    previous = plan;
  }
  return bounds;
}

}  // namespace rtgen::kernels
