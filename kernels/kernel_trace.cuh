#pragma once
// Device side of kernels/kernel_trace.h. RTGEN_TRACE_KERNEL(kTag) as a traced kernel's first
// statement records its block (start, PDL wait, end) when the build defines RTGEN_KERNEL_TRACE,
// and RTGEN_TRACE_MARK(i) (0 <= i < kTraceMarks) a point inside it that the block passed (thread
// 0 passing it is what counts); otherwise both expand to an empty statement.

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/kernel_trace_binder.h"

#if RTGEN_KERNEL_TRACE

namespace rtgen::kernels {

// All of it per translation unit: without relocatable device code every .cu has its own copy of
// the buffer pointer, so what refers to it is local too.
namespace {

// This translation unit's copy of the buffer pointer (null: not tracing).
__device__ KernelTraceBuffer* d_kernel_trace = nullptr;

cudaError_t BindKernelTraceHere(KernelTraceBuffer* buffer) {
  return cudaMemcpyToSymbol(d_kernel_trace, &buffer, sizeof(buffer));
}

[[maybe_unused]] const bool kKernelTraceBound = RegisterKernelTraceBinder(&BindKernelTraceHere);

// The block's PDL wait time (written by thread 0 in PdlWait; 0: none).
__device__ __forceinline__ unsigned long long& TraceWaitSlot() {
  __shared__ unsigned long long slot;
  return slot;
}

// The block's marks (written by thread 0 at RTGEN_TRACE_MARK; 0: not passed).
__device__ __forceinline__ unsigned long long* TraceMarkSlots() {
  __shared__ unsigned long long slots[kTraceMarks];
  return slots;
}

// Records the block when its thread 0 leaves the kernel (any return path); only thread 0 reads
// the clock or the buffer.
class KernelTraceScope {
 public:
  __device__ explicit KernelTraceScope(TraceTag tag)
      : start_(threadIdx.x == 0 ? GlobalTimerNs() : 0), tag_(static_cast<uint32_t>(tag)) {
    if (threadIdx.x != 0) return;
    TraceWaitSlot() = 0;
    for (int i = 0; i < kTraceMarks; ++i) TraceMarkSlots()[i] = 0;
  }
  __device__ ~KernelTraceScope() {
    if (threadIdx.x != 0) return;
    KernelTraceBuffer* b = d_kernel_trace;
    if (b == nullptr) return;
    // The end is read before the atomic that claims a record: its round trip (longer the more
    // blocks claim at once) is not the kernel's time.
    const unsigned long long end = GlobalTimerNs();
    const unsigned long long i = atomicAdd(&b->count, 1ull);
    if (i >= b->capacity) return;
    unsigned long long grid;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    const unsigned long long* marks = TraceMarkSlots();
    b->records[i] = {grid, start_, TraceWaitSlot(), end, {marks[0], marks[1]}, tag_, smid};
    static_assert(kTraceMarks == 2);
  }

 private:
  unsigned long long start_;
  uint32_t tag_;
};

}  // namespace
}  // namespace rtgen::kernels

#define RTGEN_TRACE_KERNEL(tag) \
  ::rtgen::kernels::KernelTraceScope rtgen_kernel_trace_scope_(::rtgen::kernels::TraceTag::tag)
#define RTGEN_TRACE_MARK(i) \
  (threadIdx.x == 0 ? static_cast<void>(::rtgen::kernels::TraceMarkSlots()[i] = \
                                            ::rtgen::kernels::GlobalTimerNs()) \
                    : static_cast<void>(0))

#else

#define RTGEN_TRACE_KERNEL(tag) static_cast<void>(0)
#define RTGEN_TRACE_MARK(i) static_cast<void>(0)

#endif  // RTGEN_KERNEL_TRACE
