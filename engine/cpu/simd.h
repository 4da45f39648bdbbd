#pragma once
// AVX2 helpers shared by the CPU kernels (built with -march=x86-64-v3).

#include <immintrin.h>

namespace rtgen::simd {

// The sum of the eight lanes of `v`.
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace rtgen::simd
