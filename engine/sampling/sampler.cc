#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/common/splitmix64.h"

namespace rtgen {
namespace {

// Repetition (HF: every distinct prompt/output token, logit > 0 ? l / p : l * p), then
// presence/frequency (vLLM: output tokens, l -= frequency * count + presence, the product and
// sum as one fused multiply-add so that no compiler choice changes the bits: the device sampler,
// kernels/sampling.h, computes the same operations and must give the same logits).
void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const int32_t> prompt, std::span<const int32_t> output) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
  if (params.repetition_penalty != 1.0f) {
    const float p = params.repetition_penalty;
    std::vector<uint8_t> seen(vocab, 0);
    for (std::span<const int32_t> tokens : {prompt, output}) {
      for (int32_t t : tokens) {
        if (!in_vocab(t) || seen[t]) continue;
        seen[t] = 1;
        logits[t] = logits[t] > 0.0f ? logits[t] / p : logits[t] * p;
      }
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::vector<int32_t> sorted(output.begin(), output.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      if (in_vocab(sorted[i])) {
        logits[sorted[i]] -= std::fma(params.frequency_penalty, static_cast<float>(j - i),
                                      params.presence_penalty);
      }
      i = j;
    }
  }
}

// Index of the largest logit; the lowest id on ties.
int32_t ArgMax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

// The `n` most likely tokens, most likely first (lowest id first on ties).
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, float lse, int32_t n) {
  n = std::min<int32_t>(n, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<TokenLogprob> top(n);
  for (int32_t i = 0; i < n; ++i) top[i] = {ids[i], logits[ids[i]] - lse};
  return top;
}

// Restricts `ids` (candidate token ids) to the smallest most-likely prefix whose probability mass
// (within the current candidates) reaches top_p. `weight[i]` is exp(logit[i] - max logit).
// Avoids sorting the whole vocab: it selects the top m by nth_element, growing m until their
// mass suffices, and sorts only those.
void ApplyTopP(std::span<const float> logits, std::span<const float> weight, float top_p,
               std::vector<int32_t>& ids) {
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  double total = 0.0;
  for (int32_t id : ids) total += weight[id];
  const double target = static_cast<double>(top_p) * total;

  size_t prefix = std::min<size_t>(ids.size(), 64);
  while (true) {
    if (prefix < ids.size()) std::nth_element(ids.begin(), ids.begin() + prefix, ids.end(), better);
    double mass = 0.0;
    for (size_t i = 0; i < prefix; ++i) mass += weight[ids[i]];
    if (mass >= target || prefix == ids.size()) break;
    prefix = std::min(ids.size(), prefix * 4);
  }
  std::sort(ids.begin(), ids.begin() + prefix, better);
  double cum = 0.0;
  size_t keep = prefix;
  for (size_t i = 0; i < prefix; ++i) {
    cum += weight[ids[i]];
    if (cum >= target) {
      keep = i + 1;
      break;
    }
  }
  ids.resize(std::max<size_t>(keep, 1));
}

// Draws from the distribution proportional to `weight` restricted to `ids` (all tokens when
// `ids` is null), with u in [0, 1).
int32_t Draw(std::span<const float> weight, const std::vector<int32_t>* ids, float u) {
  const int32_t n = ids ? static_cast<int32_t>(ids->size()) : static_cast<int32_t>(weight.size());
  auto id_at = [&](int32_t i) { return ids ? (*ids)[i] : i; };
  double total = 0.0;
  for (int32_t i = 0; i < n; ++i) total += weight[id_at(i)];
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  int32_t last_positive = id_at(0);
  for (int32_t i = 0; i < n; ++i) {
    const double p = weight[id_at(i)];
    if (p <= 0.0) continue;
    cum += p;
    last_positive = id_at(i);
    if (cum > target) return last_positive;
  }
  return last_positive;  // rounding left the target just above the total
}

}  // namespace

float CounterUniform(uint64_t seed, uint64_t counter) {
  const uint64_t x = SplitMix64(SplitMix64(seed) ^ counter);
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
}

SampledToken SampleToken(std::span<float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt, std::span<const int32_t> output,
                         uint64_t seed) {
  SampledToken result;
  if (logits.empty()) return result;
  ApplyPenalties(logits, params, prompt, output);
  if (!params.greedy()) {
    const float inv_t = 1.0f / params.temperature;
    for (float& l : logits) l *= inv_t;
  }
  // The logits made finite or -inf, as on the device (kernels/sampling.cu), after the penalties
  // and the temperature (a finite logit scaled past the float range is +inf too):
  // - a NaN (a model's overflow) counts as -inf: no mass, never drawn or listed unless every logit
  //   is one (then id 0, greedy or not), and no NaN in the comparisons the sorts below need to be
  //   a strict weak order;
  // - a +inf counts as the largest finite float: the +inf ones share all the mass, and no
  //   inf - inf = NaN in the weights and logprobs. Their logprob reads 0 even when k share it
  //   (the largest float + log k rounds to itself).
  for (float& l : logits) {
    l = std::isnan(l) ? -std::numeric_limits<float>::infinity()
                      : std::min(l, std::numeric_limits<float>::max());
  }
  // One exp pass serves the logprobs and every filter: weight[i] = exp(logit[i] - max).
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> weight(vocab);
  double total = 0.0;
  for (int32_t i = 0; i < vocab; ++i) total += weight[i] = std::exp(logits[i] - m);
  const float lse = m + static_cast<float>(std::log(total));

  // Every logit -inf (or NaN): no mass to draw from, so id 0 as greedy gives (the draw took the
  // last id, its weights all NaN), on the device as here.
  if (params.greedy() || m == -std::numeric_limits<float>::infinity()) {
    result.token_id = ArgMax(logits);
  } else {
    const float u = CounterUniform(seed, output.size());
    const bool use_top_k = params.top_k > 0 && params.top_k < vocab;
    if (!use_top_k && params.top_p >= 1.0f && params.min_p <= 0.0f) {
      result.token_id = Draw(weight, nullptr, u);
    } else {
      auto better = [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      };
      std::vector<int32_t> ids;
      if (use_top_k) {
        // One pass with a heap of the k best so far; its front is the worst of them, so most
        // tokens cost one comparison.
        ids.reserve(params.top_k);
        for (int32_t i = 0; i < vocab; ++i) {
          if (static_cast<int32_t>(ids.size()) < params.top_k) {
            ids.push_back(i);
            std::push_heap(ids.begin(), ids.end(), better);
          } else if (better(i, ids.front())) {
            std::pop_heap(ids.begin(), ids.end(), better);
            ids.back() = i;
            std::push_heap(ids.begin(), ids.end(), better);
          }
        }
        // Best first, as the device draws them (the heap's order differed whenever top-p did not
        // sort them after: top-k alone, or with min-p).
        std::sort_heap(ids.begin(), ids.end(), better);
      } else {
        ids.resize(vocab);
        std::iota(ids.begin(), ids.end(), 0);
      }
      if (params.top_p < 1.0f) ApplyTopP(logits, weight, params.top_p, ids);
      if (params.min_p > 0.0f) {
        // p >= min_p * p_max  <=>  logit >= max_logit + log(min_p) (max over the candidates).
        float cand_max = -std::numeric_limits<float>::infinity();
        for (int32_t id : ids) cand_max = std::max(cand_max, logits[id]);
        const float threshold = cand_max + std::log(params.min_p);
        std::erase_if(ids, [&](int32_t id) { return logits[id] < threshold; });
      }
      result.token_id = Draw(weight, &ids, u);
    }
  }
  result.logprob = logits[result.token_id] - lse;
  if (params.logprobs > 0) result.top = TopLogprobs(logits, lse, params.logprobs);
  return result;
}

}  // namespace rtgen
