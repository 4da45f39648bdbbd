#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/row_rms.h"

namespace rtgen::kernels {
namespace {

constexpr int kRowsPerBlock = 16;  // one warp per row at a time
constexpr int kLoads = 16;         // 16-byte loads a lane issues before its first sum

// Vector path (hidden % 8 == 0, 16-byte aligned rows): lane l sums chunks l, l + 32, ... of 8
// bf16, kLoads of them in flight at once (a Llama-3-8B row of 4096 is one round trip).
__device__ float RowSumSqVec(const __nv_bfloat16* row, int hidden, int lane) {
  const uint4* r8 = reinterpret_cast<const uint4*>(row);
  const int n8 = hidden / 8;
  float sum = 0.0f;
  for (int base = lane; base < n8; base += 32 * kLoads) {
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int c = base + 32 * j;
      v[j] = c < n8 ? r8[c] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      float f[8];
      UnpackBf16x8(v[j], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum += f[e] * f[e];
    }
  }
  return sum;
}

__device__ float RowSumSqScalar(const __nv_bfloat16* row, int hidden, int lane) {
  float sum = 0.0f;
  for (int j = lane; j < hidden; j += 32) {
    const float f = __bfloat162float(row[j]);
    sum += f * f;
  }
  return sum;
}

template <bool kVec>
__global__ void __launch_bounds__(kRowsPerBlock * 32) RowInvRmsKernel(RowInvRmsParams p) {
  RTGEN_TRACE_KERNEL(kRowInvRms);
  const int lane = threadIdx.x % 32;
  for (int t = blockIdx.x * kRowsPerBlock + threadIdx.x / 32; t < p.num_rows;
       t += gridDim.x * kRowsPerBlock) {
    const __nv_bfloat16* row = p.rows + static_cast<int64_t>(t) * p.hidden;
    const float sum = WarpSum(kVec ? RowSumSqVec(row, p.hidden, lane)
                                   : RowSumSqScalar(row, p.hidden, lane));
    if (lane == 0) p.inv_rms[t] = rsqrtf(sum / static_cast<float>(p.hidden) + p.eps);
  }
}

}  // namespace

cudaError_t RowInvRms(const RowInvRmsParams& p, cudaStream_t stream) {
  if (p.num_rows <= 0) return cudaSuccess;
  if (p.rows == nullptr || p.inv_rms == nullptr || p.hidden <= 0) return cudaErrorInvalidValue;
  const int blocks = (p.num_rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(blocks < kRowInvRmsMaxBlocks ? blocks : kRowInvRmsMaxBlocks);
  const bool vec = p.hidden % 8 == 0 && reinterpret_cast<uintptr_t>(p.rows) % 16 == 0;
  return vec ? LaunchKernelPdlIf(false, RowInvRmsKernel<true>, grid, kRowsPerBlock * 32, 0,
                                 stream, p)
             : LaunchKernelPdlIf(false, RowInvRmsKernel<false>, grid, kRowsPerBlock * 32, 0,
                                 stream, p);
}

}  // namespace rtgen::kernels
