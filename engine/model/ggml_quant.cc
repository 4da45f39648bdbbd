#include "engine/model/ggml_quant.h"

#include <algorithm>
#include <cmath>

#include "engine/model/ggml_dequant.h"

namespace rtgen {

namespace {

void StoreFp16(uint8_t* p, float f) {
  const uint16_t h = Fp32ToFp16(f);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

}  // namespace

void QuantizeQ8_0(const float* src, int64_t n_blocks, uint8_t* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kGgmlBlockSize, dst += kQ8_0BlockBytes) {
    float amax = 0.0f;
    for (int i = 0; i < kGgmlBlockSize; ++i) amax = std::max(amax, std::fabs(src[i]));
    StoreFp16(dst, amax / 127.0f);
    const float d = LoadFp16(dst);  // quantise against the scale the reader will see
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < kGgmlBlockSize; ++i) {
      const float q = std::clamp(std::round(src[i] * id), -127.0f, 127.0f);
      dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void QuantizeQ4_0(const float* src, int64_t n_blocks, uint8_t* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kGgmlBlockSize, dst += kQ4_0BlockBytes) {
    // The value of largest magnitude maps to -8 exactly; its sign picks the sign of d.
    float max = 0.0f;
    for (int i = 0; i < kGgmlBlockSize; ++i) {
      if (std::fabs(src[i]) > std::fabs(max)) max = src[i];
    }
    StoreFp16(dst, max / -8.0f);
    const float d = LoadFp16(dst);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* qs = dst + 2;
    for (int j = 0; j < kGgmlBlockSize / 2; ++j) {
      const int lo = static_cast<int>(std::clamp(std::round(src[j] * id) + 8.0f, 0.0f, 15.0f));
      const int hi =
          static_cast<int>(std::clamp(std::round(src[j + 16] * id) + 8.0f, 0.0f, 15.0f));
      qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void QuantizeQ4_1(const float* src, int64_t n_blocks, uint8_t* dst) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kGgmlBlockSize, dst += kQ4_1BlockBytes) {
    float min = src[0];
    float max = src[0];
    for (int i = 1; i < kGgmlBlockSize; ++i) {
      min = std::min(min, src[i]);
      max = std::max(max, src[i]);
    }
    StoreFp16(dst, (max - min) / 15.0f);
    StoreFp16(dst + 2, min);
    const float d = LoadFp16(dst);
    const float m = LoadFp16(dst + 2);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* qs = dst + 4;
    for (int j = 0; j < kGgmlBlockSize / 2; ++j) {
      const int lo = static_cast<int>(std::clamp(std::round((src[j] - m) * id), 0.0f, 15.0f));
      const int hi =
          static_cast<int>(std::clamp(std::round((src[j + 16] - m) * id), 0.0f, 15.0f));
      qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace rtgen
