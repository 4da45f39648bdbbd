#pragma once
// Per-request sampling and stopping parameters, with validation that names the bad field.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rtgen {

// Temperatures below this are greedy (vLLM's convention): dividing logits by a smaller one
// overflows them to inf (1e-38 turned every logit above ~3.4 into inf and the logprobs NaN).
inline constexpr float kGreedyBelowTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;         // [0, 100]; below kGreedyBelowTemperature (0 too) = greedy
  int32_t top_k = 0;                // 0 = off; otherwise in [1, vocab]
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // [0.01, 10]; HF style, over prompt and output tokens
  float presence_penalty = 0.0f;    // [-2, 2]; vLLM/OpenAI style, over output tokens
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::optional<uint64_t> seed;     // same seed + same prompt → same output
  int32_t logprobs = 0;             // top-n log-probabilities per token, [0, 20]

  bool greedy() const { return temperature < kGreedyBelowTemperature; }
  absl::Status Validate(int32_t vocab_size) const;
};

struct StoppingParams {
  int32_t max_tokens = 256;                 // [1, context]
  std::vector<std::string> stop;            // stop strings (not included in the output text)
  std::vector<int32_t> stop_token_ids;      // extra ids that end generation
  bool ignore_eos = false;
  // Each generated token is looked up in stop_token_ids on the engine thread, so their count is
  // bounded as the stop strings' is.
  absl::Status Validate(int32_t vocab_size, int32_t max_stop_strings,
                        int32_t max_stop_string_bytes, int32_t max_stop_token_ids) const;
};

}  // namespace rtgen
