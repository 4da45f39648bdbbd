#pragma once
// A step's small host <-> device copies made by a kernel instead of the copy engine
// (step_buffers.h StageIn / StageOut): the kernel reads the pinned host mirror, or writes it,
// across PCIe, so a decode graph can hold its own copies and the stream runs nothing but the
// graphs (session 73: the two copy-engine copies around each graph cost ~15 µs a step).
// The host side is pinned memory mapped into the device's address space (its device pointer);
// both pointers are 16-byte aligned.

#include <cuda_runtime.h>

#include <cstddef>

namespace rtgen::kernels {

// Copies `bytes` from `src` to `dst` on `stream`: host memory read uncached and written
// through (the host reads them after an event recorded after the grid). With `pdl` a programmatic
// dependent launch (launch.h): it waits for its predecessor's grid before reading; without, a
// plain stream-ordered launch. Every graph node running it is found by IsStepCopyNode.
cudaError_t CopyStepBytes(const void* src, void* dst, size_t bytes, bool pdl,
                          cudaStream_t stream);

// The kernel's arguments, as a graph's kernel node holds them (void* args[] in this order).
struct StepCopyArgs {
  const void* src;
  void* dst;
  size_t units;  // whole 16-byte units
  size_t tail;   // bytes after them
};

// True when `p` (a kernel node's parameters) launches CopyStepBytes's kernel; *args then gets
// its arguments.
bool IsStepCopyNode(const cudaKernelNodeParams& p, StepCopyArgs* args);

}  // namespace rtgen::kernels
