#pragma once
// A norm folded into the weights before a kernel (model_forward.h FoldsNorms; norm_fold.h): the
// kernel that consumes the projection's output scales token t's values by
// 1 / sqrt(mean(rows[t]^2) + eps), the scale the norm would have applied to the projection's
// input rows (kernels/row_rms.cuh TokenScale). Off (rows null) by default.

#include <cuda_bf16.h>

#include <cstdint>

namespace rtgen::kernels {

struct FoldedNormScale {
  const __nv_bfloat16* rows = nullptr;  // [num_tokens, hidden]: the norm's input (bf16 residual)
  int32_t hidden = 0;
  float eps = 0.0f;
  // constexpr: callable from device code (the kernels build with --expt-relaxed-constexpr)
  constexpr bool on() const { return rows != nullptr; }
  constexpr bool valid() const { return !on() || hidden > 0; }
};

}  // namespace rtgen::kernels
