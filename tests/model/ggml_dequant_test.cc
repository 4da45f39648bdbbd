#include "engine/model/ggml_dequant.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/model/ggml_quant.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

TEST(Fp16Test, ExactValuesIncludingSubnormalsAndSpecials) {
  EXPECT_EQ(Fp16ToFp32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(Fp16ToFp32(0x8000)));
  EXPECT_EQ(Fp16ToFp32(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xc000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x7bff), 65504.0f);
  EXPECT_EQ(Fp16ToFp32(0x0400), std::ldexp(1.0f, -14));        // smallest normal
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));        // smallest subnormal
  EXPECT_EQ(Fp16ToFp32(0x03ff), std::ldexp(1023.0f, -24));     // largest subnormal
  EXPECT_EQ(Fp16ToFp32(0x8201), -std::ldexp(513.0f, -24));
  EXPECT_EQ(Fp16ToFp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp16ToFp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7e00)));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7c01)));
}

TEST(Fp16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(Fp32ToFp16(f), h) << "half 0x" << std::hex << h;
    // Reference value: sign * mantissa * 2^exp computed independently with ldexp.
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    if (e == 0x1f) continue;
    const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                             : std::ldexp(static_cast<float>(1024 + m), e - 25);
    ASSERT_EQ(f, (h & 0x8000) ? -mag : mag) << h;
  }
}

TEST(Fp16Test, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: rounds up to even.
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(1e-9f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25) * 1.5f), 0x0001);
}

TEST(Bf16Test, ConversionsAndRounding) {
  EXPECT_EQ(Bf16ToFp32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFp32(0xc040), -3.0f);
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DequantTest, Q4_0NibbleOrderAndValues) {
  uint8_t block[kQ4_0BlockBytes] = {};
  block[0] = 0x00;  // d = 0.5 (fp16 0x3800)
  block[1] = 0x38;
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  DequantizeQ4_0(block, 1, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(out[j + 16], (15 - j - 8) * 0.5f) << j;
  }
}

TEST(DequantTest, Q4_1AndQ8_0Values) {
  uint8_t b41[kQ4_1BlockBytes] = {};
  b41[1] = 0x40;  // d = 2
  b41[3] = 0xbc;  // m = -1
  b41[4] = 0x31;  // element 0 -> 1, element 16 -> 3
  float out[32];
  DequantizeQ4_1(b41, 1, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[16], 5.0f);
  EXPECT_EQ(out[1], -1.0f);
  uint8_t b80[kQ8_0BlockBytes] = {};
  b80[1] = 0x34;  // d = 0.25
  b80[2] = 0x80;  // -128
  b80[33] = 0x7f;
  DequantizeQ8_0(b80, 1, out);
  EXPECT_EQ(out[0], -32.0f);
  EXPECT_EQ(out[31], 31.75f);
  EXPECT_EQ(out[5], 0.0f);
}

// Quantise random blocks and check the stated per-element error bounds.
TEST(QuantTest, RoundTripWithinStatedBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kBlocks = 64;
  std::vector<float> x(kBlocks * 32);
  for (float& v : x) v = normal(rng);
  x[5] = 0.0f;
  std::vector<uint8_t> buf(kBlocks * kQ8_0BlockBytes);  // the largest block
  std::vector<float> y(x.size());
  struct Case {
    void (*quant)(const float*, int64_t, uint8_t*);
    void (*dequant)(const uint8_t*, int64_t, float*);
    const char* name;
  };
  for (const Case& c : {Case{QuantizeQ8_0, DequantizeQ8_0, "q8_0"},
                        Case{QuantizeQ4_0, DequantizeQ4_0, "q4_0"},
                        Case{QuantizeQ4_1, DequantizeQ4_1, "q4_1"}}) {
    c.quant(x.data(), kBlocks, buf.data());
    c.dequant(buf.data(), kBlocks, y.data());
    for (int b = 0; b < kBlocks; ++b) {
      float amax = 0, lo = x[b * 32], hi = x[b * 32];
      for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(x[b * 32 + i]));
        lo = std::min(lo, x[b * 32 + i]);
        hi = std::max(hi, x[b * 32 + i]);
      }
      // Bounds from ggml_quant.h, with 1% slack for the fp16 scale (and min) rounding.
      const float bound = std::string(c.name) == "q8_0"   ? amax / 254 * 1.01f + 1e-3f * amax
                          : std::string(c.name) == "q4_0" ? amax / 8 * 1.01f
                                                          : (hi - lo) / 30 * 1.01f + 1e-3f * amax;
      for (int i = 0; i < 32; ++i) {
        ASSERT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), bound)
            << c.name << " block " << b << " elem " << i;
      }
    }
  }
}

}  // namespace
}  // namespace rtgen
