#pragma once
// The kernel trace's records (kernel_trace_records.h) gathered into grids, and the table
// rtgen-engine-bench --kernel-trace prints: host code only, apart from the device side
// (kernel_trace.h), so that it is tested without a GPU.

#include <cstdint>
#include <string>
#include <vector>

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
  // Placement: the SMs the blocks ran on, the most blocks of this grid on one SM, and the
  // median run (as median_run_us) of the blocks on an SM that also ran a block of the grid
  // before this one (in start order) against the others'; and of the blocks that share their SM
  // with another block of this grid against those alone on theirs. A median over no blocks is 0.
  int64_t sms = 0;
  int64_t max_blocks_per_sm = 0;
  int64_t blocks_on_prev_sms = 0;
  double median_run_on_prev_sms_us = 0.0;
  double median_run_off_prev_sms_us = 0.0;
  int64_t blocks_sharing_sm = 0;
  double median_run_sharing_sm_us = 0.0;
  double median_run_alone_us = 0.0;
};

// The records grouped by (grid id, tag), in order of each grid's first start; the origin is the
// earliest start of any record.
std::vector<KernelSpan> SpansFromRecords(const std::vector<KernelTraceRecord>& records);

// A table: per grid, its kernel, blocks, start, PDL wait span, end, the gap from the end of the
// grid before it to this grid's first wait (the boundary), its run (first wait to end) and the
// median block's run (blocks with nothing to do, e.g. empty attention partitions, count too);
// under a grid whose blocks passed marks, the medians between them; under every grid, its
// placement; then per kernel kind, the count and the summed runs and gaps.
std::string FormatKernelTimeline(const std::vector<KernelSpan>& spans);

}  // namespace rtgen::kernels
