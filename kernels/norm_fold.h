#pragma once
// Folds an RMSNorm's weight into the projection that reads the norm's output (model_forward.h,
// folded norms): norm(x) W^T = (x / rms(x)) (W diag(gamma))^T, so w[r, c] := bf16(w[r, c] *
// gamma[c]) for every row r, then gamma := 1. Every path that applies the norm afterwards (with
// its weight of ones) computes the same function; a consumer may also skip the norm and apply
// 1 / rms(x) to the projection's output itself.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

// w: [rows, k] row-major; gamma: [k]. Two launches on `stream`: the scaling, then the ones.
cudaError_t FoldNormIntoWeight(float* gamma, __nv_bfloat16* w, int64_t rows, int32_t k,
                               cudaStream_t stream);

}  // namespace rtgen::kernels
