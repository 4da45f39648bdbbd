#include "kernels/sample_rows.h"

#include "kernels/sample_penalties.h"

namespace rtgen {

bool NeedsHostSampling(const SampleRequest& s, int32_t max_penalty_tokens) {
  const SamplingParams& p = *s.params;
  return p.logprobs > kernels::kMaxTopLogprobs ||
         (kernels::HasPenalties(p) &&
          !kernels::PenalizesOnDevice(p, s.prompt.size(), s.output.size(), max_penalty_tokens));
}

kernels::SampleRowParams DeviceParams(const SampleRequest& s) {
  const SamplingParams& p = *s.params;
  kernels::SampleRowParams d;
  d.temperature = p.greedy() ? 0.0f : p.temperature;  // the device takes 0 alone as greedy
  d.top_k = p.top_k;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.seed = s.seed;
  d.counter = s.output.size();
  d.top_logprobs = p.logprobs;
  return d;
}

}  // namespace rtgen
