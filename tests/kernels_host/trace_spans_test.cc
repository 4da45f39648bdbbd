// The kernel trace's records gathered into grids (kernels/trace_spans.h), without a GPU: grids
// in order of their first start with their boundary times and mark medians, and where their
// blocks ran (the records themselves are tested on the GPU: tests/kernels/kernel_trace_test.cc).

#include "kernels/trace_spans.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen::kernels {
namespace {

// A record of grid `grid` (a gemv) on SM `sm`: start, wait and end in ns, no marks.
KernelTraceRecord Block(unsigned long long grid, uint32_t sm, unsigned long long start,
                        unsigned long long wait, unsigned long long end) {
  return {grid, start, wait, end, {0, 0}, static_cast<uint32_t>(TraceTag::kGemv), sm};
}

TEST(TraceSpansTest, GridsInStartOrderWithTheirTimes) {
  // Grid 9 starts first although its records come last and its id is larger.
  std::vector<KernelTraceRecord> records = {Block(5, 0, 3000, 5000, 6000),
                                            Block(5, 1, 3100, 5200, 6500),
                                            Block(9, 2, 1000, 0, 2000)};
  records[0].marks[0] = 5400;
  records[0].marks[1] = 5500;
  const std::vector<KernelSpan> spans = SpansFromRecords(records);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].blocks, 1);
  EXPECT_FALSE(spans[0].waited);
  EXPECT_DOUBLE_EQ(spans[0].first_start_us, 0.0);
  EXPECT_DOUBLE_EQ(spans[0].last_end_us, 1.0);
  EXPECT_DOUBLE_EQ(spans[0].median_run_us, 1.0);  // from its start: no wait
  const KernelSpan& g = spans[1];
  EXPECT_EQ(g.blocks, 2);
  EXPECT_TRUE(g.waited);
  EXPECT_DOUBLE_EQ(g.first_start_us, 2.0);
  EXPECT_DOUBLE_EQ(g.first_wait_us, 4.0);
  EXPECT_DOUBLE_EQ(g.last_wait_us, 4.2);
  EXPECT_DOUBLE_EQ(g.last_end_us, 5.5);
  EXPECT_DOUBLE_EQ(g.median_run_us, 1.3);  // runs 1.0 and 1.3: the upper median
  EXPECT_EQ(g.marked_blocks, 1);
  EXPECT_DOUBLE_EQ(g.median_to_mark0_us, 0.4);
  EXPECT_DOUBLE_EQ(g.median_mark0_to_mark1_us, 0.1);
  EXPECT_DOUBLE_EQ(g.median_last_mark_to_end_us, 0.5);
}

TEST(TraceSpansTest, PlacementAgainstTheGridBefore) {
  // Grid 1 on SMs 0 and 1; grid 2's blocks: two on SM 1 (a grid-1 SM), one each on SMs 4, 5.
  const std::vector<KernelTraceRecord> records = {
      Block(1, 0, 0, 100, 1100),      Block(1, 1, 0, 100, 1100),
      Block(2, 1, 500, 1200, 3200),   Block(2, 1, 500, 1200, 3000),
      Block(2, 4, 500, 1200, 2200),   Block(2, 5, 500, 1200, 2400)};
  const std::vector<KernelSpan> spans = SpansFromRecords(records);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].sms, 2);
  EXPECT_EQ(spans[0].max_blocks_per_sm, 1);
  EXPECT_EQ(spans[0].blocks_on_prev_sms, 0);  // the first grid has none before it
  EXPECT_EQ(spans[0].blocks_sharing_sm, 0);
  EXPECT_DOUBLE_EQ(spans[0].median_run_alone_us, 1.0);
  const KernelSpan& g = spans[1];
  EXPECT_EQ(g.sms, 3);
  EXPECT_EQ(g.max_blocks_per_sm, 2);
  EXPECT_EQ(g.blocks_on_prev_sms, 2);
  EXPECT_DOUBLE_EQ(g.median_run_on_prev_sms_us, 2.0);   // runs 2.0, 1.8
  EXPECT_DOUBLE_EQ(g.median_run_off_prev_sms_us, 1.2);  // runs 1.0, 1.2
  EXPECT_EQ(g.blocks_sharing_sm, 2);
  EXPECT_DOUBLE_EQ(g.median_run_sharing_sm_us, 2.0);
  EXPECT_DOUBLE_EQ(g.median_run_alone_us, 1.2);
  const std::string table = FormatKernelTimeline(spans);
  EXPECT_NE(table.find("placement: 3 SMs, at most 2 a SM; blk_run on the grid before's SMs "
                       "2.00 (2 blocks), elsewhere 1.20; sharing a SM 2.00 (2 blocks), "
                       "alone 1.20"),
            std::string::npos)
      << table;
}

// "The grid before" is the one just before: a third grid on an SM only the first used has no
// blocks on the grid before's SMs.
TEST(TraceSpansTest, PlacementAgainstOnlyTheGridJustBefore) {
  const std::vector<KernelTraceRecord> records = {Block(1, 0, 0, 0, 1000),
                                                  Block(2, 1, 1000, 0, 2000),
                                                  Block(3, 0, 2000, 0, 3000)};
  const std::vector<KernelSpan> spans = SpansFromRecords(records);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[1].blocks_on_prev_sms, 0);
  EXPECT_EQ(spans[2].blocks_on_prev_sms, 0);
  EXPECT_DOUBLE_EQ(spans[2].median_run_off_prev_sms_us, 1.0);
}

TEST(TraceSpansTest, NoRecordsNoGrids) {
  EXPECT_TRUE(SpansFromRecords({}).empty());
  EXPECT_NE(FormatKernelTimeline({}).find("the step spans 0.00"), std::string::npos);
}

}  // namespace
}  // namespace rtgen::kernels
