#pragma once
// The device side of a norm linked between two GEMVs (gemv.h GemvNormLink), shared by the
// tensor-core and the row-streaming kernels so both form the same values. Device code only.

#include <cuda_bf16.h>

#include "kernels/device_utils.cuh"
#include "kernels/gemv.h"

namespace rtgen::kernels {

// A consumer's 1 / rms over k features from its slot's value `sum` (*link.scale_by): the
// producer's sum is complete once the consumer's PDL wait has returned; read it with __ldcg (it
// was written by atomics of another grid).
__device__ __forceinline__ float NormLinkInvRms(unsigned long long sum, float eps, int k) {
  const double sum_sq = static_cast<double>(sum) / kNormSumScale;
  return rsqrtf(static_cast<float>(sum_sq / k) + eps);
}

// A pending product (gemv.h kPendingScale fixed point) as fp32.
__device__ __forceinline__ float PendingProduct(long long fixed) {
  return static_cast<float>(static_cast<double>(fixed) / kPendingScale);
}

// A producer's join of one output feature (`feature`: its index in residual and normed, row
// included): h = residual + the product rounded to bf16 (what a plain GEMV stores), residual = h,
// normed = bf16(h * weight). Returns h^2. `residual` is the feature's residual value, read by the
// caller (after its PDL wait).
__device__ __forceinline__ float NormLinkJoin(const GemvNormLink& link, int64_t feature,
                                              float residual, float weight, float product) {
  const float h = residual + RoundBf16(product);
  link.residual[feature] = h;
  link.normed[feature] = __float2bfloat16(h * weight);
  return h * h;
}

// A group of features' sum of squares in the slot's fixed point.
__device__ __forceinline__ unsigned long long NormSquaresFixed(float sum_sq) {
  return static_cast<unsigned long long>(__double2ll_rn(double{sum_sq} * kNormSumScale));
}

// Adds a group of row `row`'s features' sum of squares to the producer's slot in fixed point
// (integer atomics: the total does not depend on the order in which groups arrive, nor on how
// groups were added together before: NormSquaresFixed values may be summed first).
__device__ __forceinline__ void NormLinkAddFixed(const GemvNormLink& link, int row,
                                                 unsigned long long fixed) {
  atomicAdd(link.sum_sq + row * kNormSumRowStride, fixed);
}

__device__ __forceinline__ void NormLinkAddSquares(const GemvNormLink& link, int row,
                                                   float sum_sq) {
  NormLinkAddFixed(link, row, NormSquaresFixed(sum_sq));
}

}  // namespace rtgen::kernels
