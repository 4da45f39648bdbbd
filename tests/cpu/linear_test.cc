#include "engine/cpu/linear.h"

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 16, 100, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain << " " << i;
      }
    }
  }
}

TEST(PackedMatrixTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 1.0f / 256)), 1.0f);  // tie → even (down)
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // tie → even (up)
  EXPECT_EQ(Bf16ToF32(F32ToBf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

// Every token count (decode kernel, 1-4 token tails), odd rows, cols not a multiple of 8.
TEST(LinearTest, MatchesDoubleReferenceForAllShapes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0, 1);
  ThreadPool pool(2);
  for (WeightDtype dtype : {WeightDtype::kF32, WeightDtype::kBf16}) {
    for (int64_t cols : {8, 37, 64}) {
      const int64_t rows = 67;
      Matrix m{rows, cols, std::vector<float>(rows * cols)};
      for (float& v : m.data) v = n(rng);
      PackedMatrix w = PackedMatrix::From(m, dtype);
      for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {
        std::vector<float> x(tokens * cols);
        for (float& v : x) v = n(rng);
        const int64_t y_stride = rows + 3;
        std::vector<float> y(tokens * y_stride, 0.5f);
        Linear(w, x.data(), cols, tokens, y.data(), y_stride, /*accumulate=*/true, pool);
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0.5;
            for (int64_t k = 0; k < cols; ++k) {
              float wv = m.data[r * cols + k];
              if (dtype == WeightDtype::kBf16) wv = Bf16ToF32(F32ToBf16(wv));
              ref += double(wv) * x[t * cols + k];
            }
            ASSERT_NEAR(y[t * y_stride + r], ref, 1e-4 * (1 + std::abs(ref)))
                << WeightDtypeName(dtype) << " cols " << cols << " tokens " << tokens;
          }
          for (int64_t r = rows; r < y_stride; ++r) ASSERT_EQ(y[t * y_stride + r], 0.5f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace rtgen
