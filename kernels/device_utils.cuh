#pragma once
// Small device helpers shared by the kernels (warp/block reductions). Device code only.

#include <cuda_bf16.h>

namespace rtgen::kernels {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 values. Must be
// called by every thread of the block (contains barriers).
template <typename T>
__device__ __forceinline__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < num_warps ? scratch[lane] : T(0);
  return WarpSum(total);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < num_warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

}  // namespace rtgen::kernels
