#include "engine/model/llama3_rope.h"

#include <cmath>
#include <cstdint>

namespace rtgen {

std::vector<double> Llama3RopeFreqFactors(const Llama3RopeScaling& s, int head_dim,
                                          double theta) {
  const double kPi = 3.14159265358979323846;
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<double> factors;
  for (int64_t i = 0; i < head_dim; i += 2) {  // int64: head_dim near INT_MAX would overflow
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * kPi / freq;  // in tokens
    if (wavelen < high_wavelen) {
      factors.push_back(1.0);
    } else if (wavelen > low_wavelen) {
      factors.push_back(s.factor);
    } else {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(1.0 / ((1 - smooth) / s.factor + smooth));
    }
  }
  return factors;
}

}  // namespace rtgen
