#pragma once
// Fused residual add + RMSNorm. For each output row i (source row r = row_index ? row_index[i] : i):
//   residual[r] += add[r]                      (when add is not null; written back without
//                                               row_index)
//   out[i] = residual[r] / sqrt(mean(residual[r]^2) + eps) * weight
// With row_index (the final norm's sampled rows) nothing is written back: its rows may repeat (a
// prefill graph's padding rows all read row 0, and blocks writing one row back in turn would add
// `add` twice for a block that reads after them), and nothing reads the residual afterwards.
// The residual stream is fp32; `add` (a projection's output) and `out` are bf16. With residual16
// set instead of residual (the bf16 residual stream of model_forward.h's folded-norm steps), the
// rows are read from it and nothing is added or written back.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct RmsNormParams {
  float* residual = nullptr;             // [rows, hidden], updated in place (add, no row_index)
  const __nv_bfloat16* add = nullptr;    // [rows, hidden] or null
  const int32_t* row_index = nullptr;    // [num_rows] source rows, or null for the identity
  const float* weight = nullptr;         // [hidden]
  __nv_bfloat16* out = nullptr;          // [num_rows, hidden]
  int32_t num_rows = 0;
  int32_t hidden = 0;
  float eps = 1e-5f;
  const __nv_bfloat16* residual16 = nullptr;  // [rows, hidden]; only with residual and add null
};

cudaError_t RmsNorm(RmsNormParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
