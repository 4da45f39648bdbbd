#pragma once
// The arithmetic of rotary position embedding, shared by every kernel that rotates q and k (the
// RoPE kernels, the QKV GEMV's RoPE epilogue and the persistent decode kernel), so that they all
// give the same bits. Device code only.

#include <cuda_bf16.h>
#include <vector_types.h>

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

// RotateHalf on 4 consecutive pairs: lo holds x[i..i+3], hi holds x[i+half..i+half+3] (bf16
// each), c and s the 4 pairs' angles; rotated in place.
__device__ __forceinline__ void RotateBf16x4(uint2& lo, uint2& hi, const float* c, const float* s) {
  __nv_bfloat16* l = reinterpret_cast<__nv_bfloat16*>(&lo);
  __nv_bfloat16* h = reinterpret_cast<__nv_bfloat16*>(&hi);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const RotatedPair rot = RotateHalf(__bfloat162float(l[e]), __bfloat162float(h[e]), c[e], s[e]);
    l[e] = rot.lo;
    h[e] = rot.hi;
  }
}

}  // namespace rtgen::kernels
