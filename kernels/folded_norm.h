#pragma once
// A norm folded into the weights before a kernel (model_forward.h FoldsNorms; norm_fold.h): the
// kernel that consumes the projection's output scales token t's values by inv_rms[t], the scale
// the norm would have applied to the projection's input row t (row_rms.h RowInvRms computes it).
// Off (null) by default.

namespace rtgen::kernels {

struct FoldedNormScale {
  const float* inv_rms = nullptr;  // [num_tokens]
  // constexpr: callable from device code (the kernels build with --expt-relaxed-constexpr)
  constexpr bool on() const { return inv_rms != nullptr; }
};

}  // namespace rtgen::kernels
