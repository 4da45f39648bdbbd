#include "kernels/norm_fold.h"

namespace rtgen::kernels {
namespace {

__global__ void ScaleColumnsKernel(__nv_bfloat16* w, int64_t elems, int32_t k,
                                   const float* gamma) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < elems; i += stride) {
    w[i] = __float2bfloat16(__bfloat162float(w[i]) * gamma[i % k]);
  }
}

__global__ void OnesKernel(float* v, int32_t n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    v[i] = 1.0f;
  }
}

}  // namespace

cudaError_t FoldNormIntoWeight(float* gamma, __nv_bfloat16* w, int64_t rows, int32_t k,
                               cudaStream_t stream) {
  if (gamma == nullptr || w == nullptr || rows <= 0 || k <= 0) return cudaErrorInvalidValue;
  ScaleColumnsKernel<<<1024, 256, 0, stream>>>(w, rows * k, k, gamma);
  OnesKernel<<<(k + 255) / 256, 256, 0, stream>>>(gamma, k);
  return cudaGetLastError();
}

}  // namespace rtgen::kernels
