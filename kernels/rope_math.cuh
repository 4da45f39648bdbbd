#pragma once
// The arithmetic of rotary position embedding, shared by every kernel that rotates q and k (the
// RoPE kernels, the QKV GEMV's RoPE epilogue and the persistent decode kernel), so that they all
// give the same bits. Device code only.

#include <cuda_bf16.h>

#include <cstdint>

namespace rtgen::kernels {

// cos and sin of position * inv_freq, evaluated in fp64 (large positions keep full precision),
// then rounded to fp32.
__device__ __forceinline__ void RopeCosSin(int32_t position, float inv_freq, float* cos_out,
                                           float* sin_out) {
  double s, c;
  sincos(static_cast<double>(position) * static_cast<double>(inv_freq), &s, &c);
  *cos_out = static_cast<float>(c);
  *sin_out = static_cast<float>(s);
}

struct RotatedPair {
  __nv_bfloat16 lo;  // new x[i]
  __nv_bfloat16 hi;  // new x[i + head_dim / 2]
};

// "Rotate half": (a, b) = (x[i], x[i + half]) -> (a c - b s, b c + a s), every product and sum
// rounded in fp32 (explicit _rn operations, so no kernel gets a fused multiply-add another lacks),
// then to bf16.
__device__ __forceinline__ RotatedPair RotateHalf(float a, float b, float c, float s) {
  return {__float2bfloat16(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s))),
          __float2bfloat16(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)))};
}

}  // namespace rtgen::kernels
