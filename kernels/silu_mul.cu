#include "kernels/launch.h"
#include "kernels/silu_mul.h"

namespace rtgen::kernels {
namespace {

__global__ void SiluMulKernel(SiluMulParams p) {
  PdlWait();
  PdlLaunchDependents();
  const int t = blockIdx.y;
  const __nv_bfloat16* gate = p.in + static_cast<int64_t>(t) * 2 * p.inter;
  const __nv_bfloat16* up = gate + p.inter;
  __nv_bfloat16* out = p.out + static_cast<int64_t>(t) * p.inter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.inter; i += gridDim.x * blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * __bfloat162float(up[i]));
  }
}

}  // namespace

cudaError_t SiluMul(SiluMulParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  const int threads = 256;
  const dim3 grid((p.inter + threads - 1) / threads, p.num_tokens);
  return LaunchKernel(SiluMulKernel, grid, threads, 0, stream, p);
}

}  // namespace rtgen::kernels
