#include "kernels/rope_inv_freq.h"

#include <cmath>
#include <numbers>

namespace rtgen::kernels {

std::vector<float> RopeInvFreq(const ModelConfig& config) {
  const int half = config.head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(config.rope_theta),
                              static_cast<double>(2 * i) / config.head_dim);
    if (config.rope_scaling) {
      // Llama 3: long wavelengths are slowed by `factor`, short ones kept, the band between
      // interpolated (wavelengths in tokens).
      const Llama3RopeScaling& s = *config.rope_scaling;
      const double orig = s.original_max_position_embeddings;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > orig / s.low_freq_factor) {
        f /= s.factor;
      } else if (wavelen >= orig / s.high_freq_factor) {
        const double smooth =
            (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv_freq[i] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace rtgen::kernels
