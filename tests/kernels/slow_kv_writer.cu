#include "tests/kernels/slow_kv_writer.h"

#include "kernels/device_utils.cuh"
#include "kernels/launch.h"

namespace rtgen::testing_gpu {
namespace {

__global__ void SlowKvStoreKernel(kernels::KvStoreParams p, int64_t delay_ns) {
  kernels::PdlWait();  // the previous reader of these slots has completed
  kernels::PdlLaunchDependents();
  const uint64_t start = kernels::GlobalTimerNs();
  while (kernels::GlobalTimerNs() - start < static_cast<uint64_t>(delay_ns)) __nanosleep(1000);
  const int t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0) return;
  const int64_t base = static_cast<int64_t>(slot) * p.kv_dim;
  for (int i = threadIdx.x; i < p.kv_dim; i += blockDim.x) {
    p.k_cache[base + i] = p.k[t * p.row_stride + i];
    p.v_cache[base + i] = p.v[t * p.row_stride + i];
  }
}

__global__ void PdlCopyKernel(const uint16_t* src, uint16_t* dst, int64_t n) {
  kernels::PdlWait();
  kernels::PdlLaunchDependents();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

cudaError_t PdlCopy(const uint16_t* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return kernels::LaunchKernelPdlIf(true, PdlCopyKernel, dim3(64), dim3(256), 0, stream, src, dst,
                                    n);
}

cudaError_t SlowKvStore(const kernels::KvStoreParams& p, int64_t delay_ns, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  return kernels::LaunchKernelPdlIf(true, SlowKvStoreKernel, dim3(p.num_tokens), dim3(128), 0,
                                    stream, p, delay_ns);
}

}  // namespace rtgen::testing_gpu
