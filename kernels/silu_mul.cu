#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/silu_mul.h"

namespace rtgen::kernels {
namespace {

// Scalar path: any inter, any alignment.
__global__ void SiluMulKernel(SiluMulParams p) {
  RTGEN_TRACE_KERNEL(kSiluMul);
  PdlWait();
  PdlLaunchDependents();
  const int t = blockIdx.y;
  const float scale = p.norm.on() ? p.norm.inv_rms[t] : 1.0f;
  const __nv_bfloat16* gate = p.in + static_cast<int64_t>(t) * 2 * p.inter;
  const __nv_bfloat16* up = gate + p.inter;
  __nv_bfloat16* out = p.out + static_cast<int64_t>(t) * p.inter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.inter; i += gridDim.x * blockDim.x) {
    out[i] = SiluTimes(__bfloat162float(gate[i]) * scale, __bfloat162float(up[i]) * scale);
  }
}

// Vector path (inter % 8 == 0, 16-byte aligned rows): each thread owns 8 consecutive features of
// one token: one 16-byte load of gate and one of up (both in flight together), one 16-byte store.
__global__ void SiluMulVecKernel(SiluMulParams p) {
  RTGEN_TRACE_KERNEL(kSiluMul);
  PdlWait();
  PdlLaunchDependents();
  const int t = blockIdx.y;
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  const bool in = i < p.inter;
  const __nv_bfloat16* gate = p.in + static_cast<int64_t>(t) * 2 * p.inter + (in ? i : 0);
  const uint4 g = in ? *reinterpret_cast<const uint4*>(gate) : make_uint4(0, 0, 0, 0);
  const uint4 u = in ? *reinterpret_cast<const uint4*>(gate + p.inter) : make_uint4(0, 0, 0, 0);
  if (!in) return;
  const float scale = p.norm.on() ? p.norm.inv_rms[t] : 1.0f;
  float g8[8], u8[8];
  UnpackBf16x8(g, g8);
  UnpackBf16x8(u, u8);
  uint4 ov;
  __nv_bfloat16* o8 = reinterpret_cast<__nv_bfloat16*>(&ov);
#pragma unroll
  for (int e = 0; e < 8; ++e) o8[e] = SiluTimes(g8[e] * scale, u8[e] * scale);
  *reinterpret_cast<uint4*>(p.out + static_cast<int64_t>(t) * p.inter + i) = ov;
}

}  // namespace

cudaError_t SiluMul(SiluMulParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  const int threads = 256;
  const bool vec = p.inter % 8 == 0 && reinterpret_cast<uintptr_t>(p.in) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  if (vec) {
    const dim3 grid((p.inter / 8 + threads - 1) / threads, p.num_tokens);
    return LaunchKernel(SiluMulVecKernel, grid, threads, 0, stream, p);
  }
  const dim3 grid((p.inter + threads - 1) / threads, p.num_tokens);
  return LaunchKernel(SiluMulKernel, grid, threads, 0, stream, p);
}

}  // namespace rtgen::kernels
