#pragma once
// Internal: the BPE merge loop shared by the byte-level and SentencePiece tokenizers.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace rtgen {

struct MergeResult {
  double priority;  // lower merges first; ties go to the leftmost pair
  int32_t merged;   // the symbol the pair becomes
};
using MergeRule = std::function<std::optional<MergeResult>(int32_t left, int32_t right)>;

// Repeatedly merges the adjacent pair with the best priority, in O(n log n).
std::vector<int32_t> ApplyMerges(const std::vector<int32_t>& symbols, const MergeRule& rule);

}  // namespace rtgen
