#pragma once
// What the kernel trace (kernel_trace.h) records, shared by the device side (kernel_trace.cuh)
// and the host side (kernel_trace.cc, trace_spans.cc). Plain C++17 (.cu files include it).

#include <cstdint>

namespace rtgen::kernels {

// Which kernel a record came from (kernel_trace.cuh RTGEN_TRACE_KERNEL).
enum class TraceTag : uint32_t {
  kEmbedding,
  kRmsNorm,
  kGemv,
  kGemvRows,
  kDecodeAttention,
  kDecodeAttentionMma,
  kDecodeCombine,
  kRopeKvStore,
  kSiluMul,
  kSample,
  kRowInvRms,
  kAttentionCluster,
  kFusedMlp,
  kCount,
};

// Points inside a kernel a block may record (kernel_trace.cuh RTGEN_TRACE_MARK), in order.
constexpr int kTraceMarks = 2;

// One block of one traced grid; times from the global timer, ns.
struct KernelTraceRecord {
  unsigned long long grid;                // %gridid
  unsigned long long start;               // the block's first statement
  unsigned long long wait;                // its PDL wait returned (0: not recorded)
  unsigned long long end;                 // its thread 0 left
  unsigned long long marks[kTraceMarks];  // RTGEN_TRACE_MARK(i) passed (0: not recorded)
  uint32_t tag;                           // TraceTag
  uint32_t smid;                          // %smid: the SM the block ran on
};

struct KernelTraceBuffer {
  unsigned long long count;     // records claimed; more than capacity: overflowed
  unsigned long long capacity;
  KernelTraceRecord* records;
};

}  // namespace rtgen::kernels
