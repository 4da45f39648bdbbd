#include "engine/cpu/rope.h"

#include <cmath>

namespace rtgen {

void RopeCosSin(const std::vector<float>& inv_freq, int32_t position, float* cos_sin) {
  const size_t half = inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * static_cast<double>(inv_freq[i]);
    cos_sin[i] = static_cast<float>(std::cos(angle));
    cos_sin[half + i] = static_cast<float>(std::sin(angle));
  }
}

void ApplyRope(float* x, int num_heads, int head_dim, const float* cos_sin) {
  const int half = head_dim / 2;
  const float* c = cos_sin;
  const float* s = cos_sin + half;
  for (int h = 0; h < num_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace rtgen
