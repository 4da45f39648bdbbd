#include "kernels/trace_spans.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"

namespace rtgen::kernels {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + v.size() / 2;
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// One grid's records, gathered (times in ns of the global timer).
struct Grid {
  uint32_t tag = 0;
  int64_t blocks = 0;
  unsigned long long start = ~0ull, first_wait = ~0ull, last_wait = 0, end = 0;
  std::vector<std::pair<uint32_t, double>> sm_runs_us;  // per block: its SM, its run
  std::vector<double> to_mark0_us, mark0_to_mark1_us, last_mark_to_end_us;  // marked blocks
};

// The placement fields of `s` from its grid's blocks and the SMs of the grid before (none for
// the first).
void SetPlacement(const Grid& g, const std::set<uint32_t>& prev_sms, KernelSpan* s) {
  std::map<uint32_t, int64_t> per_sm;
  for (const auto& [sm, run] : g.sm_runs_us) ++per_sm[sm];
  s->sms = static_cast<int64_t>(per_sm.size());
  for (const auto& [sm, n] : per_sm) s->max_blocks_per_sm = std::max(s->max_blocks_per_sm, n);
  std::vector<double> on_prev, off_prev, sharing, alone;
  for (const auto& [sm, run] : g.sm_runs_us) {
    (prev_sms.count(sm) != 0 ? on_prev : off_prev).push_back(run);
    (per_sm[sm] > 1 ? sharing : alone).push_back(run);
  }
  s->blocks_on_prev_sms = static_cast<int64_t>(on_prev.size());
  s->median_run_on_prev_sms_us = Median(on_prev);
  s->median_run_off_prev_sms_us = Median(off_prev);
  s->blocks_sharing_sm = static_cast<int64_t>(sharing.size());
  s->median_run_sharing_sm_us = Median(sharing);
  s->median_run_alone_us = Median(alone);
}

}  // namespace

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

std::vector<KernelSpan> SpansFromRecords(const std::vector<KernelTraceRecord>& records) {
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
    g.sm_runs_us.emplace_back(r.smid, (r.end - from) / 1000.0);
    if (r.marks[0] != 0) {
      g.to_mark0_us.push_back((r.marks[0] - from) / 1000.0);
      const unsigned long long last = r.marks[1] != 0 ? r.marks[1] : r.marks[0];
      if (r.marks[1] != 0) g.mark0_to_mark1_us.push_back((r.marks[1] - r.marks[0]) / 1000.0);
      g.last_mark_to_end_us.push_back((r.end - last) / 1000.0);
    }
    origin = std::min(origin, r.start);
  }
  std::vector<const Grid*> order;
  for (const auto& [key, g] : grids) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(),
                   [](const Grid* a, const Grid* b) { return a->start < b->start; });
  const auto us = [origin](unsigned long long t) { return (t - origin) / 1000.0; };
  std::vector<KernelSpan> spans;
  std::set<uint32_t> prev_sms;
  for (const Grid* g : order) {
    KernelSpan s;
    std::vector<double> runs;
    for (const auto& [sm, run] : g->sm_runs_us) runs.push_back(run);
    s.median_run_us = Median(runs);
    s.marked_blocks = static_cast<int64_t>(g->to_mark0_us.size());
    s.median_to_mark0_us = Median(g->to_mark0_us);
    s.median_mark0_to_mark1_us = Median(g->mark0_to_mark1_us);
    s.median_last_mark_to_end_us = Median(g->last_mark_to_end_us);
    s.tag = static_cast<TraceTag>(g->tag);
    s.blocks = g->blocks;
    s.first_start_us = us(g->start);
    s.waited = g->last_wait != 0;
    s.first_wait_us = s.waited ? us(g->first_wait) : s.first_start_us;
    s.last_wait_us = s.waited ? us(g->last_wait) : s.first_start_us;
    s.last_end_us = us(g->end);
    SetPlacement(*g, prev_sms, &s);
    prev_sms.clear();
    for (const auto& [sm, run] : g->sm_runs_us) prev_sms.insert(sm);
    spans.push_back(s);
  }
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
    absl::StrAppendFormat(&out,
                          "%4s   placement: %d SMs, at most %d a SM; blk_run on the grid "
                          "before's SMs %.2f (%d blocks), elsewhere %.2f; sharing a SM %.2f "
                          "(%d blocks), alone %.2f\n",
                          "", s.sms, s.max_blocks_per_sm, s.median_run_on_prev_sms_us,
                          s.blocks_on_prev_sms, s.median_run_off_prev_sms_us,
                          s.median_run_sharing_sm_us, s.blocks_sharing_sm,
                          s.median_run_alone_us);
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
