#include "engine/cpu/linear.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "engine/cpu/block_gemv.h"
#include "engine/cpu/simd.h"

namespace rtgen {
namespace {

// Rows per cache block: a block of W (<= 32 rows) stays in L2 while all tokens pass over it.
constexpr int64_t kRowBlock = 32;
// Rows each thread's share is a multiple of (keeps the 4-row decode kernel busy).
constexpr int64_t kRowGrain = 16;

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  // bf16 → fp32: widen to 32 bits and shift into the high half.
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float Scalar(const float* p) { return *p; }
inline float Scalar(const uint16_t* p) { return Bf16ToF32(*p); }

using simd::HorizontalSum;

// NR rows of W (stride cols) times NT tokens of x (stride x_stride): y[t][r] for the block.
template <typename WT, int NR, int NT>
void MicroKernel(const WT* w, int64_t cols, const float* x, int64_t x_stride, float* y,
                 int64_t y_stride, bool accumulate) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t vec_end = cols & ~int64_t{7};
  for (int64_t c = 0; c < vec_end; c += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Load8(w + r * cols + c);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * x_stride + c);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int t = 0; t < NT; ++t) {
      float sum = HorizontalSum(acc[r][t]);
      for (int64_t c = vec_end; c < cols; ++c) sum += Scalar(w + r * cols + c) * x[t * x_stride + c];
      float& out = y[t * y_stride + r];
      out = accumulate ? out + sum : sum;
    }
  }
}

// Rows [r0, r1) for tokens [t0, t0 + nt) with nt <= 4, rows two at a time (one at the tail).
template <typename WT, int NT>
void RowsForTokens(const WT* w, int64_t cols, int64_t r0, int64_t r1, const float* x,
                   int64_t x_stride, float* y, int64_t y_stride, bool accumulate) {
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    MicroKernel<WT, 2, NT>(w + r * cols, cols, x, x_stride, y + r, y_stride, accumulate);
  }
  if (r < r1) MicroKernel<WT, 1, NT>(w + r * cols, cols, x, x_stride, y + r, y_stride, accumulate);
}

template <typename WT>
void LinearRows(const WT* w, int64_t cols, int64_t r0, int64_t r1, const float* x,
                int64_t x_stride, int64_t num_tokens, float* y, int64_t y_stride,
                bool accumulate) {
  if (num_tokens == 1) {
    // Decode: memory bound; four rows per pass over x.
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      MicroKernel<WT, 4, 1>(w + r * cols, cols, x, x_stride, y + r, y_stride, accumulate);
    }
    for (; r < r1; ++r) {
      MicroKernel<WT, 1, 1>(w + r * cols, cols, x, x_stride, y + r, y_stride, accumulate);
    }
    return;
  }
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t rb_end = std::min(r1, rb + kRowBlock);
    for (int64_t t = 0; t < num_tokens; t += 4) {
      const float* xt = x + t * x_stride;
      float* yt = y + t * y_stride;
      switch (std::min<int64_t>(4, num_tokens - t)) {
        case 4:
          RowsForTokens<WT, 4>(w, cols, rb, rb_end, xt, x_stride, yt, y_stride, accumulate);
          break;
        case 3:
          RowsForTokens<WT, 3>(w, cols, rb, rb_end, xt, x_stride, yt, y_stride, accumulate);
          break;
        case 2:
          RowsForTokens<WT, 2>(w, cols, rb, rb_end, xt, x_stride, yt, y_stride, accumulate);
          break;
        default:
          RowsForTokens<WT, 1>(w, cols, rb, rb_end, xt, x_stride, yt, y_stride, accumulate);
          break;
      }
    }
  }
}

// Rows [r0, r1) of a matrix held as ggml blocks. Decode steps (a few tokens) multiply on the
// blocks; prefill widens kRowBlock rows at a time to fp32 (once per call, shared by every token)
// and runs the fp32 kernels on them.
void BlockRows(const PackedMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t x_stride,
               int64_t num_tokens, float* y, int64_t y_stride, bool accumulate) {
  if (num_tokens <= kBlockGemvMaxTokens) {
    BlockGemvRows(w.block_format(), w.blocks(), w.block_row_bytes(), w.cols(), r0, r1, x,
                  x_stride, num_tokens, y, y_stride, accumulate);
    return;
  }
  thread_local std::vector<float> rows_f32;
  rows_f32.resize(kRowBlock * w.cols());
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t rb_end = std::min(r1, rb + kRowBlock);
    w.RowsToF32(rb, rb_end, rows_f32.data());
    LinearRows(rows_f32.data(), w.cols(), 0, rb_end - rb, x, x_stride, num_tokens, y + rb,
               y_stride, accumulate);
  }
}

}  // namespace

void Linear(const PackedMatrix& w, const float* x, int64_t x_stride, int64_t num_tokens, float* y,
            int64_t y_stride, bool accumulate, ThreadPool& pool) {
  if (num_tokens <= 0 || w.rows() == 0) return;
  pool.ParallelFor(w.rows(), kRowGrain, [&](int64_t r0, int64_t r1, int) {
    switch (w.dtype()) {
      case WeightDtype::kF32:
        return LinearRows(w.f32(), w.cols(), r0, r1, x, x_stride, num_tokens, y, y_stride,
                          accumulate);
      case WeightDtype::kBf16:
        return LinearRows(w.bf16(), w.cols(), r0, r1, x, x_stride, num_tokens, y, y_stride,
                          accumulate);
      case WeightDtype::kNative:
        return BlockRows(w, r0, r1, x, x_stride, num_tokens, y, y_stride, accumulate);
    }
  });
}

}  // namespace rtgen

