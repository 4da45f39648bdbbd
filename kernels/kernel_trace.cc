#include "kernels/kernel_trace.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"

#ifndef RTGEN_KERNEL_TRACE
#define RTGEN_KERNEL_TRACE 0
#endif

namespace rtgen::kernels {
namespace {

constexpr unsigned long long kCapacity = 1ull << 21;  // records (80 MiB)

std::vector<cudaError_t (*)(KernelTraceBuffer*)>& Binders() {
  static auto* binders = new std::vector<cudaError_t (*)(KernelTraceBuffer*)>();
  return *binders;
}

struct TraceMemory {
  KernelTraceBuffer* header = nullptr;  // device
  KernelTraceRecord* records = nullptr;  // device, kCapacity
};

TraceMemory& Memory() {
  static TraceMemory memory;
  return memory;
}

// Points every traced translation unit's buffer pointer at `buffer` (null: recording off).
absl::Status BindAll(KernelTraceBuffer* buffer) {
  for (auto* bind : Binders()) {
    RTGEN_CUDA_RETURN_IF_ERROR(bind(buffer));
  }
  return absl::OkStatus();
}

}  // namespace

bool RegisterKernelTraceBinder(cudaError_t (*bind)(KernelTraceBuffer* buffer)) {
  Binders().push_back(bind);
  return true;
}

const char* TraceTagName(TraceTag tag) {
  switch (tag) {
    case TraceTag::kEmbedding: return "embedding";
    case TraceTag::kRmsNorm: return "rms_norm";
    case TraceTag::kGemv: return "gemv";
    case TraceTag::kGemvRows: return "gemv_rows";
    case TraceTag::kDecodeAttention: return "decode_attn";
    case TraceTag::kDecodeAttentionMma: return "decode_attn_mma";
    case TraceTag::kDecodeCombine: return "decode_combine";
    case TraceTag::kRopeKvStore: return "rope_kv_store";
    case TraceTag::kSiluMul: return "silu_mul";
    case TraceTag::kRowInvRms: return "row_inv_rms";
    case TraceTag::kAttentionCluster: return "attention_cluster";
    case TraceTag::kFusedMlp: return "fused_mlp";
    case TraceTag::kSample: return "sample";
    case TraceTag::kCount: break;
  }
  return "?";
}

bool KernelTraceCompiledIn() { return RTGEN_KERNEL_TRACE != 0; }

absl::Status KernelTraceBegin() {
  if (!KernelTraceCompiledIn()) {
    return absl::FailedPreconditionError(
        "the kernel trace is not compiled in: configure with -DRTGEN_KERNEL_TRACE=ON");
  }
  TraceMemory& m = Memory();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // nothing earlier lands in the buffer
  // Records first, then the header: the header is set last, so a records buffer whose header
  // failed is reused by the next call, not allocated again (it leaked).
  if (m.records == nullptr) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&m.records, kCapacity * sizeof(KernelTraceRecord)));
  }
  if (m.header == nullptr) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&m.header, sizeof(KernelTraceBuffer)));
  }
  const KernelTraceBuffer header{0, kCapacity, m.records};
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(m.header, &header, sizeof(header), cudaMemcpyHostToDevice));
  RETURN_IF_ERROR(BindAll(m.header));
  // The copies above run on the legacy stream, which the backend's non-blocking streams do not
  // wait for: finish them before any traced launch.
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KernelSpan>> KernelTraceEnd() {
  TraceMemory& m = Memory();
  if (!KernelTraceCompiledIn() || m.header == nullptr) {
    return absl::FailedPreconditionError("no kernel trace is on (KernelTraceBegin)");
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  RETURN_IF_ERROR(BindAll(nullptr));  // later kernels record nothing
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KernelTraceBuffer header{};
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(&header, m.header, sizeof(header), cudaMemcpyDeviceToHost));
  if (header.count > header.capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the kernel trace overflowed: ", header.count, " records for ",
                     header.capacity));
  }
  std::vector<KernelTraceRecord> records(header.count);
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(records.data(), m.records,
                                        records.size() * sizeof(KernelTraceRecord),
                                        cudaMemcpyDeviceToHost));
  struct Grid {
    uint32_t tag = 0;
    int64_t blocks = 0;
    unsigned long long start = ~0ull, first_wait = ~0ull, last_wait = 0, end = 0;
    std::vector<double> runs_us;  // per block
    std::vector<double> to_mark0_us, mark0_to_mark1_us, last_mark_to_end_us;  // marked blocks
  };
  std::map<std::pair<unsigned long long, uint32_t>, Grid> grids;
  unsigned long long origin = ~0ull;
  for (const KernelTraceRecord& r : records) {
    Grid& g = grids[{r.grid, r.tag}];
    g.tag = r.tag;
    ++g.blocks;
    g.start = std::min(g.start, r.start);
    g.end = std::max(g.end, r.end);
    if (r.wait != 0) {
      g.first_wait = std::min(g.first_wait, r.wait);
      g.last_wait = std::max(g.last_wait, r.wait);
    }
    const unsigned long long from = r.wait != 0 ? r.wait : r.start;
    g.runs_us.push_back((r.end - from) / 1000.0);
    if (r.marks[0] != 0) {
      g.to_mark0_us.push_back((r.marks[0] - from) / 1000.0);
      const unsigned long long last = r.marks[1] != 0 ? r.marks[1] : r.marks[0];
      if (r.marks[1] != 0) g.mark0_to_mark1_us.push_back((r.marks[1] - r.marks[0]) / 1000.0);
      g.last_mark_to_end_us.push_back((r.end - last) / 1000.0);
    }
    origin = std::min(origin, r.start);
  }
  std::vector<KernelSpan> spans;
  const auto us = [origin](unsigned long long t) { return (t - origin) / 1000.0; };
  const auto median = [](std::vector<double>& v) {
    if (v.empty()) return 0.0;
    const auto mid = v.begin() + v.size() / 2;
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
  };
  for (auto& [key, g] : grids) {
    KernelSpan s;
    s.median_run_us = median(g.runs_us);
    s.marked_blocks = static_cast<int64_t>(g.to_mark0_us.size());
    s.median_to_mark0_us = median(g.to_mark0_us);
    s.median_mark0_to_mark1_us = median(g.mark0_to_mark1_us);
    s.median_last_mark_to_end_us = median(g.last_mark_to_end_us);
    s.tag = static_cast<TraceTag>(g.tag);
    s.blocks = g.blocks;
    s.first_start_us = us(g.start);
    s.waited = g.last_wait != 0;
    s.first_wait_us = s.waited ? us(g.first_wait) : s.first_start_us;
    s.last_wait_us = s.waited ? us(g.last_wait) : s.first_start_us;
    s.last_end_us = us(g.end);
    spans.push_back(s);
  }
  std::sort(spans.begin(), spans.end(), [](const KernelSpan& a, const KernelSpan& b) {
    return a.first_start_us < b.first_start_us;
  });
  return spans;
}

std::string FormatKernelTimeline(const std::vector<KernelSpan>& spans) {
  std::string out =
      absl::StrFormat("%4s %-16s %7s %9s %9s %9s %9s %8s %8s %8s\n", "#", "kernel", "blocks",
                      "start", "wait0", "wait1", "end", "gap", "run", "blk_run");
  struct Sum {
    int count = 0;
    double run = 0.0, gap = 0.0;
  };
  std::map<std::string, Sum> sums;
  double prev_end = 0.0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const KernelSpan& s = spans[i];
    // gap: from the previous grid's last block leaving to this grid's first block past its wait
    // (the boundary, when this grid waits on that one); run: from then to this grid's end;
    // blk_run: the median block's own time from its wait to its end.
    const double gap = i == 0 ? 0.0 : s.first_wait_us - prev_end;
    const double run = s.last_end_us - s.first_wait_us;
    absl::StrAppendFormat(&out, "%4zu %-16s %7d %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f\n", i,
                          TraceTagName(s.tag), s.blocks, s.first_start_us, s.first_wait_us,
                          s.last_wait_us, s.last_end_us, gap, run, s.median_run_us);
    if (s.marked_blocks > 0) {
      absl::StrAppendFormat(&out,
                            "%4s   marks: %d blocks; wait to mark 0 %.2f, mark 0 to 1 %.2f, "
                            "last mark to end %.2f (medians)\n",
                            "", s.marked_blocks, s.median_to_mark0_us,
                            s.median_mark0_to_mark1_us, s.median_last_mark_to_end_us);
    }
    Sum& sum = sums[TraceTagName(s.tag)];
    ++sum.count;
    sum.run += run;
    sum.gap += gap;
    prev_end = s.last_end_us;
  }
  const double total = spans.empty() ? 0.0 : spans.back().last_end_us;
  absl::StrAppendFormat(&out, "per kernel kind (us summed over the step; the step spans %.2f):\n",
                        total);
  for (const auto& [name, sum] : sums) {
    absl::StrAppendFormat(&out, "  %-16s %5d launches  run %9.2f  gap before %9.2f\n", name,
                          sum.count, sum.run, sum.gap);
  }
  return out;
}

}  // namespace rtgen::kernels
