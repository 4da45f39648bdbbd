#include "engine/cpu/block_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/cpu/simd.h"
#include "engine/model/ggml_dequant.h"

namespace rtgen {
namespace {

// Tokens sharing one widening of a block (accumulators stay in registers).
constexpr int kTokensPerPass = 4;

// fp16 → fp32 with F16C, inlined in the block loop (ggml_dequant.h's LoadFp16 is the portable,
// out-of-line version for load-time work).
inline float Fp16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Eight unsigned bytes (the low 8 of `v`) as eight floats.
inline __m256 U8ToF32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }
// Eight signed bytes at p as eight floats.
inline __m256 I8ToF32(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

using simd::HorizontalSum;

// The 32 weights of one block as four vectors of quantised values (before scale and min).
struct Widened {
  __m256 q[4];
  float d;
  float m;  // Q4 formats: the value of q = 0 (Q4_0: -8 d); Q8_0: unused
};

template <BlockFormat kFormat>
inline Widened Widen(const uint8_t* block) {
  Widened out;
  out.d = Fp16At(block);
  if constexpr (kFormat == BlockFormat::kQ8_0) {
    const uint8_t* q = block + 2;
    for (int i = 0; i < 4; ++i) out.q[i] = I8ToF32(q + 8 * i);
    out.m = 0.0f;
  } else {
    // Byte j holds element j (low nibble) and element j + 16 (high nibble).
    constexpr bool kHasMin = kFormat == BlockFormat::kQ4_1;
    out.m = kHasMin ? Fp16At(block + 2) : -8.0f * out.d;
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const __m128i q =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (kHasMin ? 4 : 2)));
    const __m128i lo = _mm_and_si128(q, low_mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low_mask);
    out.q[0] = U8ToF32(lo);
    out.q[1] = U8ToF32(_mm_srli_si128(lo, 8));
    out.q[2] = U8ToF32(hi);
    out.q[3] = U8ToF32(_mm_srli_si128(hi, 8));
  }
  return out;
}

template <BlockFormat kFormat>
constexpr int64_t BlockBytes() {
  return kFormat == BlockFormat::kQ8_0   ? kQ8_0BlockBytes
         : kFormat == BlockFormat::kQ4_1 ? kQ4_1BlockBytes
                                         : kQ4_0BlockBytes;
}

// One row for NT tokens. The row's blocks are read in memory order (rows one at a time, so the
// weights stream sequentially: interleaving 4 rows measured 2-3x slower out of cache here).
// x_sums[t][b] is the sum of token t's x over block b (Q4 formats).
template <BlockFormat kFormat, int NT>
void RowForTokens(const uint8_t* w, int64_t n_blocks, const float* x, int64_t x_stride,
                  const float* x_sums, float* y, int64_t y_stride, bool accumulate) {
  constexpr bool kQ4 = kFormat != BlockFormat::kQ8_0;
  __m256 acc[NT];
  float min_acc[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    min_acc[t] = 0.0f;
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const Widened wb = Widen<kFormat>(w + b * BlockBytes<kFormat>());
    const __m256 d = _mm256_set1_ps(wb.d);
    for (int t = 0; t < NT; ++t) {
      const float* xb = x + t * x_stride + b * kGgmlBlockSize;
      __m256 s = _mm256_mul_ps(wb.q[0], _mm256_loadu_ps(xb));
      s = _mm256_fmadd_ps(wb.q[1], _mm256_loadu_ps(xb + 8), s);
      s = _mm256_fmadd_ps(wb.q[2], _mm256_loadu_ps(xb + 16), s);
      s = _mm256_fmadd_ps(wb.q[3], _mm256_loadu_ps(xb + 24), s);
      acc[t] = _mm256_fmadd_ps(s, d, acc[t]);
      if constexpr (kQ4) min_acc[t] += wb.m * x_sums[t * n_blocks + b];
    }
  }
  for (int t = 0; t < NT; ++t) {
    const float v = HorizontalSum(acc[t]) + min_acc[t];
    float& out = y[t * y_stride];
    out = accumulate ? out + v : v;
  }
}

template <BlockFormat kFormat>
void Rows(const uint8_t* blocks, int64_t row_bytes, int64_t n_blocks, int64_t r0, int64_t r1,
          const float* x, int64_t x_stride, int64_t num_tokens, float* y, int64_t y_stride,
          bool accumulate) {
  thread_local std::vector<float> x_sums;
  if constexpr (kFormat != BlockFormat::kQ8_0) {
    x_sums.resize(num_tokens * n_blocks);
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t b = 0; b < n_blocks; ++b) {
        const float* xb = x + t * x_stride + b * kGgmlBlockSize;
        float s = 0.0f;
        for (int i = 0; i < kGgmlBlockSize; ++i) s += xb[i];
        x_sums[t * n_blocks + b] = s;
      }
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = blocks + r * row_bytes;
    for (int64_t t = 0; t < num_tokens; t += kTokensPerPass) {
      const float* xt = x + t * x_stride;
      // Q8_0 has no sums (x_sums stays empty): no offset from its null data.
      const float* st = x_sums.empty() ? nullptr : x_sums.data() + t * n_blocks;
      float* yt = y + t * y_stride + r;
      switch (std::min<int64_t>(kTokensPerPass, num_tokens - t)) {
        case 4:
          RowForTokens<kFormat, 4>(w, n_blocks, xt, x_stride, st, yt, y_stride, accumulate);
          break;
        case 3:
          RowForTokens<kFormat, 3>(w, n_blocks, xt, x_stride, st, yt, y_stride, accumulate);
          break;
        case 2:
          RowForTokens<kFormat, 2>(w, n_blocks, xt, x_stride, st, yt, y_stride, accumulate);
          break;
        default:
          RowForTokens<kFormat, 1>(w, n_blocks, xt, x_stride, st, yt, y_stride, accumulate);
          break;
      }
    }
  }
}

}  // namespace

void BlockGemvRows(BlockFormat format, const uint8_t* blocks, int64_t row_bytes, int64_t cols,
                   int64_t r0, int64_t r1, const float* x, int64_t x_stride, int64_t num_tokens,
                   float* y, int64_t y_stride, bool accumulate) {
  const int64_t n_blocks = cols / kGgmlBlockSize;
  switch (format) {
    case BlockFormat::kQ4_1:
      return Rows<BlockFormat::kQ4_1>(blocks, row_bytes, n_blocks, r0, r1, x, x_stride,
                                      num_tokens, y, y_stride, accumulate);
    case BlockFormat::kQ4_0:
      return Rows<BlockFormat::kQ4_0>(blocks, row_bytes, n_blocks, r0, r1, x, x_stride,
                                      num_tokens, y, y_stride, accumulate);
    case BlockFormat::kQ8_0:
      return Rows<BlockFormat::kQ8_0>(blocks, row_bytes, n_blocks, r0, r1, x, x_stride,
                                      num_tokens, y, y_stride, accumulate);
    case BlockFormat::kNone:
      return;
  }
}

}  // namespace rtgen
