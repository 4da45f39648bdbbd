#pragma once
// A linear layer's weight as the CPU backend stores it: row-major [rows][cols] in fp32 or bf16
// (bf16 = the top 16 bits of an fp32, rounded to nearest even; halves the bytes each decode
// step streams from memory).

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cpu/huge_page_allocator.h"
#include "engine/model/model_weights.h"

namespace rtgen {

enum class WeightDtype { kF32, kBf16 };

const char* WeightDtypeName(WeightDtype dtype);

class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Stacks the rows of `parts` (all with equal cols) into one matrix, converting to `dtype`.
  static PackedMatrix FromRows(std::span<const Matrix* const> parts, WeightDtype dtype);
  static PackedMatrix From(const Matrix& m, WeightDtype dtype) {
    const Matrix* parts[] = {&m};
    return FromRows(parts, dtype);
  }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  WeightDtype dtype() const { return dtype_; }
  int64_t bytes() const { return rows_ * cols_ * (dtype_ == WeightDtype::kF32 ? 4 : 2); }
  const float* f32() const { return f32_.data(); }
  const uint16_t* bf16() const { return bf16_.data(); }
  // Writes row `r` as fp32 into out[0, cols).
  void RowToF32(int64_t r, float* out) const;

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  WeightDtype dtype_ = WeightDtype::kF32;
  std::vector<float, HugePageAllocator<float>> f32_;
  std::vector<uint16_t, HugePageAllocator<uint16_t>> bf16_;
};

uint16_t F32ToBf16(float f);
float Bf16ToF32(uint16_t b);

}  // namespace rtgen
