#include "engine/cpu/packed_matrix.h"

#include <cmath>
#include <cstring>

namespace rtgen {

const char* WeightDtypeName(WeightDtype dtype) {
  return dtype == WeightDtype::kF32 ? "f32" : "bf16";
}

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a NaN
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bf16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

PackedMatrix PackedMatrix::FromRows(std::span<const Matrix* const> parts, WeightDtype dtype) {
  PackedMatrix p;
  p.dtype_ = dtype;
  p.cols_ = parts.empty() ? 0 : parts[0]->cols;
  for (const Matrix* m : parts) p.rows_ += m->rows;
  const int64_t n = p.rows_ * p.cols_;
  if (dtype == WeightDtype::kF32) {
    p.f32_.reserve(n);
    for (const Matrix* m : parts) p.f32_.insert(p.f32_.end(), m->data.begin(), m->data.end());
  } else {
    p.bf16_.reserve(n);
    for (const Matrix* m : parts) {
      for (float f : m->data) p.bf16_.push_back(F32ToBf16(f));
    }
  }
  return p;
}

void PackedMatrix::RowToF32(int64_t r, float* out) const {
  if (dtype_ == WeightDtype::kF32) {
    std::memcpy(out, f32_.data() + r * cols_, cols_ * sizeof(float));
  } else {
    const uint16_t* row = bf16_.data() + r * cols_;
    for (int64_t c = 0; c < cols_; ++c) out[c] = Bf16ToF32(row[c]);
  }
}

}  // namespace rtgen
