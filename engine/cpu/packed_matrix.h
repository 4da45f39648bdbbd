#pragma once
// A linear layer's weight as the CPU backend stores it: row-major [rows][cols] in fp32, bf16
// (bf16 = the top 16 bits of an fp32, rounded to nearest even; halves the bytes each decode
// step streams from memory), or the model file's own ggml blocks (Q8_0, Q4_0, Q4_1: the exact
// weights at 1.06, 0.56 and 0.63 bytes each).

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cpu/huge_page_allocator.h"
#include "engine/model/model_weights.h"

namespace rtgen {

// How the backend stores its weights.
//  kF32:    exact, 4 bytes per weight (tests).
//  kBf16:   2 bytes per weight, rounded.
//  kNative: matrices the file stored in a ggml block format stay in it (exact, fewest bytes);
//           the others (fp32/fp16/bf16 files) are stored as bf16.
enum class WeightDtype { kF32, kBf16, kNative };

const char* WeightDtypeName(WeightDtype dtype);

class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Stacks the rows of `parts` (all with equal cols) into one matrix in `dtype`. With kNative,
  // the parts' blocks are kept when every part has blocks of one format; otherwise bf16.
  static PackedMatrix FromRows(std::span<const Matrix* const> parts, WeightDtype dtype);
  static PackedMatrix From(const Matrix& m, WeightDtype dtype) {
    const Matrix* parts[] = {&m};
    return FromRows(parts, dtype);
  }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // kF32, kBf16, or kNative when the matrix holds blocks (then block_format() says which).
  WeightDtype dtype() const { return dtype_; }
  BlockFormat block_format() const { return block_format_; }
  int64_t bytes() const;
  const float* f32() const { return f32_.data(); }
  const uint16_t* bf16() const { return bf16_.data(); }
  const uint8_t* blocks() const { return blocks_.data(); }
  int64_t block_row_bytes() const { return block_row_bytes_; }  // bytes of one row's blocks
  // Writes row `r` as fp32 into out[0, cols).
  void RowToF32(int64_t r, float* out) const;
  // Writes rows [r0, r1) as fp32 into out (row-major, stride cols).
  void RowsToF32(int64_t r0, int64_t r1, float* out) const;

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  WeightDtype dtype_ = WeightDtype::kF32;
  BlockFormat block_format_ = BlockFormat::kNone;
  int64_t block_row_bytes_ = 0;
  std::vector<float, HugePageAllocator<float>> f32_;
  std::vector<uint16_t, HugePageAllocator<uint16_t>> bf16_;
  std::vector<uint8_t, HugePageAllocator<uint8_t>> blocks_;
};

uint16_t F32ToBf16(float f);
float Bf16ToF32(uint16_t b);

}  // namespace rtgen
