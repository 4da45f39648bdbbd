#pragma once
// CPU sampling from one row of logits. Order: penalties → temperature → top-k → top-p → min-p
// → draw. Randomness is counter-based: the draw for output position n of a request depends only
// on (seed, n), whatever else is in the batch. (The logits themselves may differ in their last
// bits with the step's batch: the backends' linear layers take other routes at other sizes.)

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/sampling_params.h"

namespace rtgen {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;  // natural log, of the distribution after penalties and temperature
};

struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // params.logprobs entries, most likely first
};

// A uniform draw in [0, 1) from (seed, counter): splitmix64 of both, 24 mantissa bits.
float CounterUniform(uint64_t seed, uint64_t counter);

// `logits` is modified in place (penalties, temperature). `prompt` and `output` are the request's
// tokens so far (for penalties); `seed` is the request's seed (or one the engine drew for it) and
// `output.size()` is the draw's counter.
SampledToken SampleToken(std::span<float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt, std::span<const int32_t> output,
                         uint64_t seed);

}  // namespace rtgen
