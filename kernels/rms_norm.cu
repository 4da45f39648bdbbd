#include "kernels/device_utils.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/rms_norm.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
// Vector path: each thread owns up to kVecPerThread float4 of the row (hidden ≤ 8192, % 4 == 0),
// and issues every load of the row before the first use, so a row costs one memory round trip
// instead of one per strided iteration (the decode step's norms are latency, not bytes).
constexpr int kVecPerThread = 8;
constexpr int kMaxVecHidden = kThreads * kVecPerThread * 4;

__device__ __forceinline__ float4 AddBf16x4(float4 v, uint2 a) {
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.y));
  return make_float4(v.x + lo.x, v.y + lo.y, v.z + hi.x, v.w + hi.y);
}

__global__ void __launch_bounds__(kThreads) RmsNormVecKernel(RmsNormParams p) {
  RTGEN_TRACE_KERNEL(kRmsNorm);
  __shared__ float scratch[32];
  const int n4 = p.hidden / 4;
  // The weight is written by no kernel of the step: load it before the PDL wait.
  float4 w[kVecPerThread];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    w[j] = c < n4 ? reinterpret_cast<const float4*>(p.weight)[c] : make_float4(0, 0, 0, 0);
  }
  PdlWait();
  PdlLaunchDependents();
  const int i = blockIdx.x;
  const int r = p.row_index ? p.row_index[i] : i;
  const int64_t row = static_cast<int64_t>(r) * p.hidden;
  float4* res = p.residual ? reinterpret_cast<float4*>(p.residual + row) : nullptr;
  const uint2* res16 = p.residual16 ? reinterpret_cast<const uint2*>(p.residual16 + row) : nullptr;
  const uint2* add = p.add ? reinterpret_cast<const uint2*>(p.add + row) : nullptr;
  float4 v[kVecPerThread];
  uint2 a[kVecPerThread];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    const bool in = c < n4;
    const float4 zero = make_float4(0, 0, 0, 0);
    v[j] = !in ? zero : res ? res[c] : AddBf16x4(zero, res16[c]);  // a bf16 row: 0 + x
    a[j] = in && add ? add[c] : make_uint2(0, 0);
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= n4) continue;
    if (add) {
      v[j] = AddBf16x4(v[j], a[j]);
      if (!p.row_index) res[c] = v[j];  // gathered rows may repeat: rms_norm.h
    }
    sum_sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  uint2* out = reinterpret_cast<uint2*>(p.out + static_cast<int64_t>(i) * p.hidden);
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= n4) continue;
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[j].x * inv_rms * w[j].x,
                                                    v[j].y * inv_rms * w[j].y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[j].z * inv_rms * w[j].z,
                                                    v[j].w * inv_rms * w[j].w);
    uint2 o;
    o.x = *reinterpret_cast<const uint32_t*>(&lo);
    o.y = *reinterpret_cast<const uint32_t*>(&hi);
    out[c] = o;
  }
}

// Any hidden size: strided scalar loop.
__global__ void __launch_bounds__(kThreads) RmsNormKernel(RmsNormParams p) {
  RTGEN_TRACE_KERNEL(kRmsNorm);
  __shared__ float scratch[32];
  PdlWait();
  PdlLaunchDependents();
  const int i = blockIdx.x;
  const int r = p.row_index ? p.row_index[i] : i;
  const int64_t row = static_cast<int64_t>(r) * p.hidden;
  float* res = p.residual ? p.residual + row : nullptr;
  const __nv_bfloat16* res16 = p.residual16 ? p.residual16 + row : nullptr;
  const __nv_bfloat16* add = p.add ? p.add + row : nullptr;
  const auto value = [&](int j) { return res16 ? __bfloat162float(res16[j]) : res[j]; };
  const bool write_back = add && !p.row_index;  // gathered rows may repeat: rms_norm.h
  // Element j of the row after the add: read back where this thread wrote it, else formed again
  // (the same float sum).
  const auto summed = [&](int j) {
    return write_back ? res[j] : add ? value(j) + __bfloat162float(add[j]) : value(j);
  };
  float sum_sq = 0.0f;
  for (int j = threadIdx.x; j < p.hidden; j += kThreads) {
    float h = value(j);
    if (add) {
      h += __bfloat162float(add[j]);
      if (write_back) res[j] = h;
    }
    sum_sq += h * h;
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + static_cast<int64_t>(i) * p.hidden;
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed.
  for (int j = threadIdx.x; j < p.hidden; j += kThreads) {
    out[j] = __float2bfloat16(summed(j) * inv_rms * p.weight[j]);
  }
}

}  // namespace

cudaError_t RmsNorm(RmsNormParams p, cudaStream_t stream) {
  if (p.num_rows <= 0) return cudaSuccess;
  if ((p.residual == nullptr) == (p.residual16 == nullptr) ||
      (p.residual16 != nullptr && p.add != nullptr)) {
    return cudaErrorInvalidValue;  // exactly one residual; nothing is added to a bf16 one
  }
  // Buffers come from cudaMalloc (256-byte aligned); rows of hidden % 4 == 0 elements keep
  // float4 / 4 x bf16 alignment.
  if (p.hidden % 4 == 0 && p.hidden <= kMaxVecHidden) {
    return LaunchKernel(RmsNormVecKernel, p.num_rows, kThreads, 0, stream, p);
  }
  return LaunchKernel(RmsNormKernel, p.num_rows, kThreads, 0, stream, p);
}

}  // namespace rtgen::kernels
