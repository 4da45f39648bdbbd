#pragma once
// How each traced translation unit's device copy of the trace buffer pointer is set
// (kernel_trace.cuh registers, kernel_trace.cc binds). CUDA runtime only (.cu files include it).

#include <cuda_runtime.h>

#include "kernels/kernel_trace_records.h"

namespace rtgen::kernels {

// Each translation unit that traces kernels registers how to point its device copy of the
// buffer pointer at the buffer (kernel_trace.cuh: without relocatable device code every .cu has
// its own copy). Returns true (for a static initialiser).
bool RegisterKernelTraceBinder(cudaError_t (*bind)(KernelTraceBuffer* buffer));

}  // namespace rtgen::kernels
