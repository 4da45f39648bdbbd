// The decode GEMV as it was before the tensor-core rewrite (kernels/gemv.cu at 5d4544a: one warp
// per output feature, one 16-byte weight load per lane per iteration), kept only so that
// rtgen-gemv-bench can print before/after figures in one run.

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "tools/gemv_bench_legacy.h"

namespace rtgen::bench {
namespace {

using kernels::GemvParams;
constexpr int kWarpsPerBlock = 4;

template <int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) LegacyKernel(GemvParams p) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (n >= p.n) return;
  const uint4* w = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(n) * p.k);
  const int chunks = p.k / 8;
  float acc[M] = {};
  for (int c = lane; c < chunks; c += 32) {
    const uint4 wv = w[c];
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const uint4 xv = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(r) * p.k)[c];
      const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 a = __bfloat1622float2(w2[j]);
        const float2 b = __bfloat1622float2(x2[j]);
        acc[r] += a.x * b.x + a.y * b.y;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) {
    const float v = kernels::WarpSum(acc[r]);
    if (lane == 0) {
      const int64_t o = static_cast<int64_t>(r) * p.n + n;
      if (p.y_f32) {
        static_cast<float*>(p.y)[o] = v;
      } else {
        static_cast<__nv_bfloat16*>(p.y)[o] = __float2bfloat16(v);
      }
    }
  }
}

template <int M>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const int blocks = (p.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  LegacyKernel<M><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(p);
}

}  // namespace

cudaError_t LegacyGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.k % 8 != 0 || p.n <= 0) return cudaErrorInvalidValue;
  switch (p.m) {
    case 1: Launch<1>(p, stream); break;
    case 2: Launch<2>(p, stream); break;
    case 4: Launch<4>(p, stream); break;
    case 8: Launch<8>(p, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rtgen::bench
