#pragma once
// A diagnostic timeline of the kernels of one decode step (issue 4: where the step's time goes,
// kernel by kernel). Compiled in only with the CMake option RTGEN_KERNEL_TRACE=ON (a separate
// build: per block of every traced kernel, thread 0 reads the clock three times and stores one
// word in shared memory, and while a trace is on adds one atomic and one 56-byte record; the
// other threads only test their index); otherwise the kernels carry none of it and
// KernelTraceBegin reports that it is not compiled in.
//
// Each traced kernel's block records the global timer when it starts, when its PDL wait returns
// (launch.h PdlWait), at up to kTraceMarks marks inside the kernel (RTGEN_TRACE_MARK) and when
// its thread 0 leaves (the block's end as far as the trace knows), with the SM it ran on; the
// host groups the records by grid and orders the grids by their first start (trace_spans.h).
// Kernels that are not ours (cuBLASLt) leave gaps.

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/trace_spans.h"

namespace rtgen::kernels {

// True when this build traces its kernels.
bool KernelTraceCompiledIn();

// Clears the record buffer (allocated on first use, on the current device) and turns recording
// on, so that only kernels launched from now on are recorded. FailedPrecondition when not
// compiled in.
absl::Status KernelTraceBegin();

// Waits for the device, turns recording off, then returns the grids recorded since
// KernelTraceBegin, in order of their first start. An error if the buffer overflowed.
absl::StatusOr<std::vector<KernelSpan>> KernelTraceEnd();

}  // namespace rtgen::kernels
