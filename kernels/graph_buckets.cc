#include "kernels/graph_buckets.h"

#include <algorithm>

namespace rtgen {

std::vector<int32_t> DefaultGraphBuckets(int32_t max_batch) {
  std::vector<int32_t> out;
  for (int32_t b : {1, 2, 4, 8, 16, 24, 32}) {
    if (b <= max_batch) out.push_back(b);
  }
  for (int32_t b = 48; b <= max_batch; b += 16) out.push_back(b);
  if (max_batch > 0 && (out.empty() || out.back() != max_batch)) out.push_back(max_batch);
  return out;
}

std::vector<int32_t> DefaultPrefillGraphTokens(int32_t max_tokens) {
  std::vector<int32_t> out;
  for (int32_t t : {16, 32, 48, 64, 96, 128, 192, 256, 384, 512}) {
    if (t <= max_tokens) out.push_back(t);
  }
  for (int32_t t = 768; t <= max_tokens; t += 256) out.push_back(t);
  if (max_tokens > 0 && (out.empty() || out.back() != max_tokens)) out.push_back(max_tokens);
  return out;
}

std::vector<int32_t> DefaultMixedGraphSeqs(int32_t tokens, int32_t max_seqs) {
  const int32_t most = std::min(tokens, max_seqs);
  std::vector<int32_t> out;
  for (int32_t s = 2; s <= most; s *= 2) out.push_back(s);
  if (most >= 2 && out.back() != most) out.push_back(most);
  return out;
}

bool PrefillPaddingPays(int64_t layer_params, int32_t num_layers, int32_t tokens,
                        int32_t bucket) {
  constexpr int32_t kKnee = 128;               // tokens: below, the weight stream dominates
  constexpr double kFlopsBelowKnee = 2.5e15;   // FLOP/s a padding token's matmuls seem to run at
  constexpr double kFlopsPastKnee = 7.5e14;
  constexpr double kSavedPerLayer = 6e-6;      // seconds of launches a replay saves per layer
  const double flop_per_token = 2.0 * static_cast<double>(layer_params) * num_layers;
  const double below = std::min(bucket, kKnee) - std::min(tokens, kKnee);
  const double past = std::max(bucket, kKnee) - std::max(tokens, kKnee);
  const double cost = flop_per_token * (below / kFlopsBelowKnee + past / kFlopsPastKnee);
  return cost <= kSavedPerLayer * num_layers;
}

}  // namespace rtgen
