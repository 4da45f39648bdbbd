#include "engine/cpu/rope.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

ModelConfig Llama3Config() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling = Llama3RopeScaling{32.0f, 1.0f, 4.0f, 8192};
  return c;
}

TEST(RopeTest, UnscaledInvFreqIsThetaPower) {
  ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 10000.0f;
  std::vector<float> f = ComputeRopeInvFreq(c);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64), 1e-7) << i;
}

TEST(RopeTest, Llama3ScalingFollowsTheFormula) {
  const ModelConfig c = Llama3Config();
  const Llama3RopeScaling& s = *c.rope_scaling;
  std::vector<float> got = ComputeRopeInvFreq(c);
  ASSERT_EQ(got.size(), 64u);
  int low = 0, mid = 0, high = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * std::numbers::pi / base;
    const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    double expected;
    if (wavelen < high_wavelen) {
      expected = base;
      ++high;
    } else if (wavelen > low_wavelen) {
      expected = base / s.factor;
      ++low;
    } else {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      expected = (1 - smooth) * base / s.factor + smooth * base;
      ++mid;
    }
    EXPECT_NEAR(got[i], expected, 1e-6 * expected) << i;
  }
  // All three bands are exercised.
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
  EXPECT_GT(high, 0);
  // Spot values: the first frequency is untouched, the last divided by the factor.
  EXPECT_FLOAT_EQ(got[0], 1.0f);
  EXPECT_NEAR(got[63], std::pow(500000.0, -126.0 / 128) / 32.0, 1e-12);
}

TEST(RopeTest, ApplyRotatesHalvesAndPreservesNorm) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000.0f;
  std::vector<float> inv = ComputeRopeInvFreq(c);
  std::vector<float> cs(8);
  RopeCosSin(inv, 3, cs.data());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, 0.5f, 0.25f, 0, 1};
  std::vector<float> y = x;
  ApplyRope(y.data(), 2, 8, cs.data());
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      const double angle = 3.0 * std::pow(10000.0, -2.0 * i / 8);
      const double a = x[h * 8 + i], b = x[h * 8 + i + 4];
      EXPECT_NEAR(y[h * 8 + i], a * std::cos(angle) - b * std::sin(angle), 1e-5);
      EXPECT_NEAR(y[h * 8 + i + 4], b * std::cos(angle) + a * std::sin(angle), 1e-5);
    }
  }
}

}  // namespace
}  // namespace rtgen
