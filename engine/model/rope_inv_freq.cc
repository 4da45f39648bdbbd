#include "engine/model/rope_inv_freq.h"

#include <cmath>
#include <numbers>

namespace rtgen {

std::vector<float> ComputeRopeInvFreq(const ModelConfig& config) {
  const int half = config.head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const double exponent = static_cast<double>(2 * i) / config.head_dim;
    inv_freq[i] = static_cast<float>(1.0 / std::pow(static_cast<double>(config.rope_theta),
                                                    exponent));
  }
  if (!config.rope_scaling) return inv_freq;

  const Llama3RopeScaling& s = *config.rope_scaling;
  const double old_context = s.original_max_position_embeddings;
  const double low_freq_wavelen = old_context / s.low_freq_factor;    // longer: scaled down
  const double high_freq_wavelen = old_context / s.high_freq_factor;  // shorter: unchanged
  for (int i = 0; i < half; ++i) {
    const double f = inv_freq[i];
    const double wavelen = 2.0 * std::numbers::pi / f;
    double out = f;
    if (wavelen > low_freq_wavelen) {
      out = f / s.factor;
    } else if (wavelen >= high_freq_wavelen) {
      // Medium band: interpolate between the scaled and unscaled frequency.
      const double smooth = (old_context / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      out = (1.0 - smooth) * f / s.factor + smooth * f;
    }
    inv_freq[i] = static_cast<float>(out);
  }
  return inv_freq;
}

}  // namespace rtgen
