#include "engine/cpu/linear.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/model/ggml_dequant.h"
#include "engine/model/ggml_quant.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

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
      Matrix m{rows, cols, std::vector<float>(rows * cols), {}};
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


// A matrix quantised to `format` with its blocks kept, as the GGUF loader produces it.
Matrix QuantizedMatrix(BlockFormat format, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> n(0, 1);
  Matrix m{rows, cols, std::vector<float>(rows * cols), {}};
  std::vector<float> source(rows * cols);
  for (float& v : source) v = n(rng);
  const int64_t n_blocks = rows * cols / kGgmlBlockSize;
  m.quantized.format = format;
  m.quantized.bytes.resize(n_blocks * BlockFormatBytes(format));
  uint8_t* q = m.quantized.bytes.data();
  switch (format) {
    case BlockFormat::kQ8_0:
      QuantizeQ8_0(source.data(), n_blocks, q);
      DequantizeQ8_0(q, n_blocks, m.data.data());
      break;
    case BlockFormat::kQ4_0:
      QuantizeQ4_0(source.data(), n_blocks, q);
      DequantizeQ4_0(q, n_blocks, m.data.data());
      break;
    default:
      QuantizeQ4_1(source.data(), n_blocks, q);
      DequantizeQ4_1(q, n_blocks, m.data.data());
      break;
  }
  return m;
}

// Native (block) weights: the few-token kernel on the blocks (1..8 tokens, 4 per pass plus tails)
// and the prefill path that widens row blocks to fp32 (9+) both equal the fp32 matmul of the dequantised weights (summation order aside).
TEST(LinearTest, NativeBlocksMatchDequantizedReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0, 1);
  ThreadPool pool(2);
  for (BlockFormat format : {BlockFormat::kQ8_0, BlockFormat::kQ4_0, BlockFormat::kQ4_1}) {
    for (int64_t cols : {32, 96, 576}) {
      const int64_t rows = 71;  // 4-row passes plus a tail, 32-row prefill blocks plus a tail
      const Matrix m = QuantizedMatrix(format, rows, cols, rng);
      const PackedMatrix w = PackedMatrix::From(m, WeightDtype::kNative);
      ASSERT_EQ(w.dtype(), WeightDtype::kNative);
      ASSERT_EQ(w.block_format(), format);
      EXPECT_EQ(w.bytes(), static_cast<int64_t>(m.quantized.bytes.size()));
      std::vector<float> row(cols);
      w.RowToF32(rows - 1, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), m.data.end() - cols));
      for (int64_t tokens : {1, 2, 3, 4, 5, 8, 9, 12}) {
        for (bool accumulate : {false, true}) {
          std::vector<float> x(tokens * cols);
          for (float& v : x) v = n(rng);
          const int64_t y_stride = rows + 2;
          std::vector<float> y(tokens * y_stride, 0.25f);
          Linear(w, x.data(), cols, tokens, y.data(), y_stride, accumulate, pool);
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              double ref = accumulate ? 0.25 : 0.0;
              double scale = 1.0;
              for (int64_t k = 0; k < cols; ++k) {
                const double p = double(m.data[r * cols + k]) * x[t * cols + k];
                ref += p;
                scale += std::abs(p);
              }
              ASSERT_NEAR(y[t * y_stride + r], ref, 2e-6 * scale)
                  << BlockFormatName(format) << " cols " << cols << " tokens " << tokens
                  << " row " << r;
            }
            for (int64_t r = rows; r < y_stride; ++r) ASSERT_EQ(y[t * y_stride + r], 0.25f);
          }
        }
      }
    }
  }
}

TEST(LinearTest, NativeFallsBackToBf16WithoutCommonBlocks) {
  std::mt19937 rng(3);
  const Matrix q4 = QuantizedMatrix(BlockFormat::kQ4_1, 8, 64, rng);
  const Matrix q8 = QuantizedMatrix(BlockFormat::kQ8_0, 8, 64, rng);
  Matrix plain = q4;
  plain.quantized = {};
  const Matrix* mixed[] = {&q4, &q8};
  EXPECT_EQ(PackedMatrix::FromRows(mixed, WeightDtype::kNative).dtype(), WeightDtype::kBf16);
  EXPECT_EQ(PackedMatrix::From(plain, WeightDtype::kNative).dtype(), WeightDtype::kBf16);
  const Matrix* same[] = {&q4, &q4};
  const PackedMatrix stacked = PackedMatrix::FromRows(same, WeightDtype::kNative);
  EXPECT_EQ(stacked.block_format(), BlockFormat::kQ4_1);
  EXPECT_EQ(stacked.rows(), 16);
}

}  // namespace
}  // namespace rtgen
