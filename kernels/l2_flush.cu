// L2 eviction by reading (see l2_flush.h).

#include <cstdint>

#include "kernels/l2_flush.h"

namespace rtgen::kernels {
namespace {

__global__ void __launch_bounds__(256) L2FlushReadKernel(const uint4* buf, size_t n,
                                                          uint32_t never) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // `never` is 0 and acc | 1 is not: the reads are live but nothing is stored.
  if ((acc | 1u) == never) const_cast<uint4*>(buf)[0] = make_uint4(acc, 0, 0, 0);
}

}  // namespace

cudaError_t L2FlushRead(const void* buf, size_t bytes, cudaStream_t stream) {
  const size_t n = bytes / 16;
  if (n == 0) return cudaSuccess;
  L2FlushReadKernel<<<132 * 8, 256, 0, stream>>>(static_cast<const uint4*>(buf), n, 0u);
  return cudaGetLastError();
}

}  // namespace rtgen::kernels
