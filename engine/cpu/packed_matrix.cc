#include "engine/cpu/packed_matrix.h"

#include <cmath>
#include <cstring>

#include "engine/model/ggml_dequant.h"

namespace rtgen {

const char* WeightDtypeName(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kF32:
      return "f32";
    case WeightDtype::kBf16:
      return "bf16";
    case WeightDtype::kNative:
      break;
  }
  return "native";
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

namespace {

// The block format every part shares, or kNone.
BlockFormat CommonBlockFormat(std::span<const Matrix* const> parts) {
  if (parts.empty()) return BlockFormat::kNone;
  const BlockFormat format = parts[0]->quantized.format;
  for (const Matrix* m : parts) {
    if (m->quantized.format != format) return BlockFormat::kNone;
  }
  return format;
}

}  // namespace

PackedMatrix PackedMatrix::FromRows(std::span<const Matrix* const> parts, WeightDtype dtype) {
  PackedMatrix p;
  p.cols_ = parts.empty() ? 0 : parts[0]->cols;
  for (const Matrix* m : parts) p.rows_ += m->rows;
  const int64_t n = p.rows_ * p.cols_;
  const BlockFormat format = CommonBlockFormat(parts);
  if (dtype == WeightDtype::kNative && format != BlockFormat::kNone) {
    p.dtype_ = WeightDtype::kNative;
    p.block_format_ = format;
    p.block_row_bytes_ =
        p.cols_ / kGgmlBlockSize * static_cast<int64_t>(BlockFormatBytes(format));
    p.blocks_.reserve(p.rows_ * p.block_row_bytes_);
    for (const Matrix* m : parts) {
      p.blocks_.insert(p.blocks_.end(), m->quantized.bytes.begin(), m->quantized.bytes.end());
    }
  } else if (dtype == WeightDtype::kF32) {
    p.dtype_ = WeightDtype::kF32;
    p.f32_.reserve(n);
    for (const Matrix* m : parts) p.f32_.insert(p.f32_.end(), m->data.begin(), m->data.end());
  } else {
    p.dtype_ = WeightDtype::kBf16;
    p.bf16_.reserve(n);
    for (const Matrix* m : parts) {
      for (float f : m->data) p.bf16_.push_back(F32ToBf16(f));
    }
  }
  return p;
}

int64_t PackedMatrix::bytes() const {
  switch (dtype_) {
    case WeightDtype::kF32:
      return rows_ * cols_ * 4;
    case WeightDtype::kBf16:
      return rows_ * cols_ * 2;
    case WeightDtype::kNative:
      break;
  }
  return rows_ * block_row_bytes_;
}

void PackedMatrix::RowToF32(int64_t r, float* out) const { RowsToF32(r, r + 1, out); }

void PackedMatrix::RowsToF32(int64_t r0, int64_t r1, float* out) const {
  const int64_t n = (r1 - r0) * cols_;
  switch (dtype_) {
    case WeightDtype::kF32:
      std::memcpy(out, f32_.data() + r0 * cols_, n * sizeof(float));
      return;
    case WeightDtype::kBf16: {
      const uint16_t* src = bf16_.data() + r0 * cols_;
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(src[i]);
      return;
    }
    case WeightDtype::kNative:
      break;
  }
  const uint8_t* src = blocks_.data() + r0 * block_row_bytes_;
  const int64_t n_blocks = n / kGgmlBlockSize;
  switch (block_format_) {
    case BlockFormat::kQ8_0:
      return DequantizeQ8_0(src, n_blocks, out);
    case BlockFormat::kQ4_0:
      return DequantizeQ4_0(src, n_blocks, out);
    case BlockFormat::kQ4_1:
      return DequantizeQ4_1(src, n_blocks, out);
    case BlockFormat::kNone:
      return;
  }
}

}  // namespace rtgen
