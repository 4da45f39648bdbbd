#include "kernels/step_copy.h"

#include <cstdint>

#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 64;

// Thread i copies 16-byte units i, i + stride, ...; the bytes past the whole units one a thread.
// The wait is a no-op in a plain launch. No system fence: the host reads the writes after
// waiting for an event recorded after the grid, which completes only once they are visible.
__global__ void __launch_bounds__(kThreads) CopyStepBytesKernel(const void* src, void* dst,
                                                                size_t units, size_t tail) {
  PdlWait();
  PdlLaunchDependents();
  const auto* s = static_cast<const uint4*>(src);
  auto* d = static_cast<uint4*>(dst);
  const size_t first = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = first; i < units; i += stride) __stwt(d + i, __ldcv(s + i));
  if (first < tail) {
    reinterpret_cast<volatile unsigned char*>(d + units)[first] =
        reinterpret_cast<const volatile unsigned char*>(s + units)[first];
  }
}

}  // namespace

cudaError_t CopyStepBytes(const void* src, void* dst, size_t bytes, bool pdl,
                          cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const size_t units = bytes / sizeof(uint4), tail = bytes % sizeof(uint4);
  size_t blocks = (units + kThreads - 1) / kThreads;
  blocks = blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks;
  return LaunchKernelPdlIf(pdl && PdlEnabled(), CopyStepBytesKernel,
                           dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, src,
                           dst, units, tail);
}

bool IsStepCopyNode(const cudaKernelNodeParams& p, StepCopyArgs* args) {
  if (p.func != reinterpret_cast<void*>(CopyStepBytesKernel) || p.kernelParams == nullptr) {
    return false;
  }
  args->src = *static_cast<const void* const*>(p.kernelParams[0]);
  args->dst = *static_cast<void* const*>(p.kernelParams[1]);
  args->units = *static_cast<const size_t*>(p.kernelParams[2]);
  args->tail = *static_cast<const size_t*>(p.kernelParams[3]);
  return true;
}

}  // namespace rtgen::kernels
