#pragma once
// The folded norms' row scales (model_forward.h FoldsNorms): inv_rms[t] = 1 / sqrt(mean(rows[t]^2)
// + eps) of bf16 rows, summed in fp32. A decode step computes them on a side stream while the
// projection after the norm runs (it reads the same rows), so the kernel that applies them
// (RoPE + KV store, SiLU·mul) only loads one float per token.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct RowInvRmsParams {
  const __nv_bfloat16* rows = nullptr;  // [num_rows, hidden]
  float* inv_rms = nullptr;             // [num_rows]
  int32_t num_rows = 0;
  int32_t hidden = 0;
  float eps = 0.0f;
};

// At most kRowInvRmsMaxBlocks blocks, so that the launch fits on the SMs a one-wave cuBLASLt
// GEMM leaves free beside it (132 SMs, 128-CTA tiles at Llama-3-8B's decode shapes). A plain
// launch (not a programmatic dependent): the side stream's event wait orders it.
inline constexpr int kRowInvRmsMaxBlocks = 4;
cudaError_t RowInvRms(const RowInvRmsParams& p, cudaStream_t stream);

}  // namespace rtgen::kernels
