#include "kernels/device_utils.cuh"
#include "kernels/launch.h"
#include "kernels/rms_norm.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) RmsNormKernel(RmsNormParams p) {
  __shared__ float scratch[32];
  PdlWait();
  PdlLaunchDependents();
  const int i = blockIdx.x;
  const int r = p.row_index ? p.row_index[i] : i;
  float* res = p.residual + static_cast<int64_t>(r) * p.hidden;
  const __nv_bfloat16* add = p.add ? p.add + static_cast<int64_t>(r) * p.hidden : nullptr;
  float sum_sq = 0.0f;
  for (int j = threadIdx.x; j < p.hidden; j += kThreads) {
    float h = res[j];
    if (add) {
      h += __bfloat162float(add[j]);
      res[j] = h;
    }
    sum_sq += h * h;
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + static_cast<int64_t>(i) * p.hidden;
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed.
  for (int j = threadIdx.x; j < p.hidden; j += kThreads) {
    out[j] = __float2bfloat16(res[j] * inv_rms * p.weight[j]);
  }
}

}  // namespace

cudaError_t RmsNorm(RmsNormParams p, cudaStream_t stream) {
  if (p.num_rows <= 0) return cudaSuccess;
  return LaunchKernel(RmsNormKernel, p.num_rows, kThreads, 0, stream, p);
}

}  // namespace rtgen::kernels
