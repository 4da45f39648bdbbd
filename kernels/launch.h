#pragma once
// One way to launch every kernel of a forward step: as a programmatic dependent launch (PDL,
// cudaLaunchAttributeProgrammaticStreamSerialization), which also works under graph capture.
//
// A PDL kernel may start while its predecessor on the stream is still running, so every kernel
// launched through LaunchKernel follows two rules:
//   - before PdlWait() it reads only data no kernel of the step writes (weights, RoPE
//     frequencies, the step arrays that copies fill before the step: a memcpy, or in a staged
//     decode graph the stage-in kernel, after which the embedding is a plain launch, so every
//     later kernel starts after that copy has completed) and writes nothing;
//   - every thread calls PdlWait() on every path, before any early return: a grid completes only
//     after its wait, so each kernel's completion implies its predecessors' (transitively).
// PdlLaunchDependents() lets the next kernel start its own prologue (e.g. the GEMV's first weight
// loads) while this one runs; it promises nothing about memory. Every kernel calls it after its
// own PdlWait(), so a kernel that starts has all launches before its predecessor completed: decode
// attention relies on that to copy keys written by earlier steps before its wait (prefetch_kv).
// A kernel that released its dependents before its wait would break that.
// RTGEN_PDL=0 in the environment launches everything as plain stream-ordered kernels (A/B);
// the two device functions are then no-ops.

#include <cuda_runtime.h>

#include <utility>

#include "kernels/env_switch.h"
#if defined(__CUDACC__) && RTGEN_KERNEL_TRACE
#include "kernels/kernel_trace.cuh"
#endif

namespace rtgen::kernels {

// False when RTGEN_PDL=0 (read once per process).
inline bool PdlEnabled() {
  static const bool enabled = EnvOnUnlessZero("RTGEN_PDL");
  return enabled;
}

#ifdef __CUDACC__
// Waits until the predecessor grid has completed and its writes are visible. (A kernel-trace
// build records when thread 0 gets past it: kernel_trace.h.)
__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if RTGEN_KERNEL_TRACE
  if (threadIdx.x == 0) TraceWaitSlot() = GlobalTimerNs();
#endif
}

// Allows the dependent grid to be scheduled once every block of this grid has called it.
__device__ __forceinline__ void PdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent when `pdl`.
// Returns the launch's error (no separate cudaGetLastError needed).
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchKernelPdlIf(bool pdl, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                              size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent (unless RTGEN_PDL=0).
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, Args&&... args) {
  return LaunchKernelPdlIf(PdlEnabled(), kernel, grid, block, smem, stream,
                           std::forward<Args>(args)...);
}
#endif  // __CUDACC__

}  // namespace rtgen::kernels
