#pragma once
// A diagnostic timeline of the kernels of one decode step (issue 4: where the step's time goes,
// kernel by kernel). Compiled in only with the CMake option RTGEN_KERNEL_TRACE=ON (a separate
// build: per block of every traced kernel, thread 0 reads the clock three times and stores one
// word in shared memory, and while a trace is on adds one atomic and one 40-byte record; the
// other threads only test their index); otherwise the kernels carry none of it and
// KernelTraceBegin reports that it is not compiled in.
//
// Each traced kernel's block records the global timer when it starts, when its PDL wait returns
// (launch.h PdlWait), at up to kTraceMarks marks inside the kernel (RTGEN_TRACE_MARK) and when
// its thread 0 leaves (the block's end as far as the trace knows); the host groups the records by
// grid and orders the grids by their first start. Kernels that are not ours (cuBLASLt) leave
// gaps.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel_trace_records.h"

namespace rtgen::kernels {

const char* TraceTagName(TraceTag tag);

// One grid of the traced step: times in µs from the step's first block start.
struct KernelSpan {
  TraceTag tag = TraceTag::kCount;
  int64_t blocks = 0;
  double first_start_us = 0.0;
  bool waited = false;         // a block recorded its PDL wait (the two times below)
  double first_wait_us = 0.0;  // the first block past its PDL wait
  double last_wait_us = 0.0;
  double last_end_us = 0.0;
  double median_run_us = 0.0;  // over blocks: from its wait (its start if none) to its end
  // The blocks that passed mark 0, and the median over them of the time from their wait (start
  // if none) to mark 0, from mark 0 to mark 1 (blocks past both) and from their last mark to
  // their end.
  int64_t marked_blocks = 0;
  double median_to_mark0_us = 0.0;
  double median_mark0_to_mark1_us = 0.0;
  double median_last_mark_to_end_us = 0.0;
};

// True when this build traces its kernels.
bool KernelTraceCompiledIn();

// Clears the record buffer (allocated on first use, on the current device) and turns recording
// on, so that only kernels launched from now on are recorded. FailedPrecondition when not
// compiled in.
absl::Status KernelTraceBegin();

// Waits for the device, turns recording off, then returns the grids recorded since
// KernelTraceBegin, in order of their first start. An error if the buffer overflowed.
absl::StatusOr<std::vector<KernelSpan>> KernelTraceEnd();

// A table: per grid, its kernel, blocks, start, PDL wait span, end, the gap from the end of the
// grid before it to this grid's first wait (the boundary), its run (first wait to end) and the
// median block's run (blocks with nothing to do, e.g. empty attention partitions, count too);
// under a grid whose blocks passed marks, the medians between them; then per kernel kind, the
// count and the summed runs and gaps.
std::string FormatKernelTimeline(const std::vector<KernelSpan>& spans);

}  // namespace rtgen::kernels
