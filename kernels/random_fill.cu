#include "kernels/random_fill.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 8192;  // grid-stride beyond this: fills the chip, bounded launch

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float Sample(uint64_t key, int64_t i, const RandomFillParams& p) {
  const uint64_t h = SplitMix64(key ^ SplitMix64(static_cast<uint64_t>(i)));
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1p-24f;        // (0, 1]
  const float u2 = static_cast<float>(h & 0xffffffull) * 0x1p-24f;         // [0, 1)
  float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  const float kMinAbs = 1e-3f;
  if (fabsf(z) < kMinAbs) z = copysignf(kMinAbs, z);
  return p.mean + p.stddev * z;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) RandomFillKernel(T* out, int64_t n,
                                                             RandomFillParams p) {
  const uint64_t key = SplitMix64(p.seed) ^ SplitMix64(p.tensor_id * 0x632be59bd9b4e019ull + 1);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = Sample(key, i, p);
    if constexpr (sizeof(T) == 2) {
      out[i] = __float2bfloat16(v);
    } else {
      out[i] = v;
    }
  }
}

template <typename T>
cudaError_t Launch(T* out, int64_t n, RandomFillParams p, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (out == nullptr || !(p.stddev > 0.0f)) return cudaErrorInvalidValue;
  const int64_t want = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(want < kMaxBlocks ? want : kMaxBlocks);
  RandomFillKernel<T><<<blocks, kThreads, 0, stream>>>(out, n, p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t RandomFillBf16(__nv_bfloat16* out, int64_t n, RandomFillParams p,
                           cudaStream_t stream) {
  return Launch(out, n, p, stream);
}

cudaError_t RandomFillF32(float* out, int64_t n, RandomFillParams p, cudaStream_t stream) {
  return Launch(out, n, p, stream);
}

}  // namespace rtgen::kernels
