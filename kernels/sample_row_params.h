#pragma once
// What the device sampler (kernels/sampling.h) reads per logits row: plain structs, without
// CUDA, so host code built everywhere (kernels/sample_penalties.h) can fill them.

#include <cstdint>

namespace rtgen::kernels {

// One distinct token a penalized row has seen (its prompt and its known output): the
// repetition penalty applies to it once; presence and frequency apply when output_count > 0.
struct SamplePenaltyEntry {
  int32_t token = 0;         // in [0, vocab); distinct within a row's entries
  int32_t output_count = 0;  // occurrences among the row's known output tokens
};

// Most top-n logprobs a row may ask for (SamplingParams::logprobs is validated to [0, 20]).
constexpr int32_t kMaxTopLogprobs = 20;

// One of a row's top-n tokens: its id and log-probability (natural log, of the distribution
// after penalties and temperature), as the CPU sampler's TokenLogprob.
struct SampleTopEntry {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleRowParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  uint64_t counter = 0;      // output position of the draw
  // Penalties, applied to the logits before everything else (engine/sampling/sampler.h's
  // order: repetition, then presence and frequency) over the row's entries
  // SampleTokensParams::penalty_entries[penalty_begin, penalty_begin + penalty_count) and, when
  // penalty_pending >= 0, one more output token: the id the step's embedding resolved for token
  // row penalty_pending (SampleTokensParams::resolved_token_ids), which the host did not know
  // yet when it built the entries (a pending token, engine/pending_token.h).
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_begin = 0;
  int32_t penalty_count = 0;
  int32_t penalty_pending = -1;
  // The n most likely tokens to return with their logprobs (0: none; more than
  // kMaxTopLogprobs is taken as kMaxTopLogprobs), written to SampleTokensParams::top[row]. A
  // split greedy row has each of its blocks list its part's n best, merged by the last block.
  int32_t top_logprobs = 0;
};

}  // namespace rtgen::kernels
