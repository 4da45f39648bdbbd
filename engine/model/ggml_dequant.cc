#include "engine/model/ggml_dequant.h"

#include <bit>
#include <cstring>

namespace rtgen {

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: value = mant * 2^-24. Normalise the mantissa.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t Fp32ToFp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u; // rounds to >= 65520: infinity
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127;
  if (exp >= -14) {
    // Normal half: keep 10 mantissa bits, round to nearest even on the 13 dropped.
    uint32_t mant = abs & 0x7fffffu;
    uint32_t half = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exp
    return sign | static_cast<uint16_t>(half);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: value = m * 2^-24 with m = round(full_mantissa * 2^(exp + 24 - 23)).
  const uint32_t full = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 1;  // 14..24: bits to drop from the 24-bit significand
  uint32_t m = full >> shift;
  const uint32_t rest = full & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
  return sign | static_cast<uint16_t>(m);
}

float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t Fp32ToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float LoadFp16(const uint8_t* p) {
  return Fp16ToFp32(static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8)));
}

void DequantizeQ8_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQ8_0BlockBytes, dst += kGgmlBlockSize) {
    const float d = LoadFp16(src);
    for (int i = 0; i < kGgmlBlockSize; ++i) {
      dst[i] = static_cast<float>(static_cast<int8_t>(src[2 + i])) * d;
    }
  }
}

void DequantizeQ4_0(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQ4_0BlockBytes, dst += kGgmlBlockSize) {
    const float d = LoadFp16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < kGgmlBlockSize / 2; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      dst[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const uint8_t* src, int64_t n_blocks, float* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQ4_1BlockBytes, dst += kGgmlBlockSize) {
    const float d = LoadFp16(src);
    const float m = LoadFp16(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < kGgmlBlockSize / 2; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

}  // namespace rtgen
