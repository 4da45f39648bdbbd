// Which prefill attention kernel serves a block of query tokens (kernels/prefill_runs.h), without
// a GPU: the runs of one sequence each that both kernels count the same way.

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/prefill_runs.h"

namespace rtgen::kernels {
namespace {

using Rows = std::array<int32_t, kPrefillBlockRows>;

// Rows filled from (sequence, count) pieces in order; -1 is padding; the rest padding.
Rows Block(const std::vector<std::pair<int32_t, int>>& pieces) {
  Rows rows;
  rows.fill(-1);
  int r = 0;
  for (auto [seq, count] : pieces) {
    for (int i = 0; i < count; ++i) rows[r++] = seq;
  }
  return rows;
}

// Every run as (sequence, begin, end), through NextPrefillRun.
std::vector<std::array<int, 3>> Runs(const Rows& rows) {
  std::vector<std::array<int, 3>> runs;
  int begin = 0, end = 0;
  for (int32_t seq; (seq = NextPrefillRun(rows.data(), end, &begin, &end)) >= 0;) {
    runs.push_back({seq, begin, end});
  }
  return runs;
}

TEST(PrefillRunsTest, OneSequenceIsOneRunWhateverItsPadding) {
  const Rows whole = Block({{3, kPrefillBlockRows}});
  EXPECT_EQ(Runs(whole), (std::vector<std::array<int, 3>>{{3, 0, kPrefillBlockRows}}));
  // Padding before, inside and after: still one run, from its first row to its last.
  const Rows padded = Block({{-1, 5}, {7, 10}, {-1, 2}, {7, 20}, {-1, 27}});
  EXPECT_EQ(Runs(padded), (std::vector<std::array<int, 3>>{{7, 5, kPrefillBlockRows}}));
  EXPECT_EQ(PrefillRuns(padded.data()), 1);
}

TEST(PrefillRunsTest, AChunkBoundaryIsTwoRunsTheTensorCoreKernelKeeps) {
  const Rows rows = Block({{0, 37}, {1, 27}});
  EXPECT_EQ(Runs(rows), (std::vector<std::array<int, 3>>{{0, 0, 37}, {1, 37, 64}}));
  EXPECT_LE(PrefillRuns(rows.data()), kPrefillMaxRuns);
}

TEST(PrefillRunsTest, DecodeTokensFirstMakeAManyRunBlockForTheCudaCoreKernel) {
  // A mixed step as the scheduler orders it: three decode tokens, then a chunk.
  const Rows rows = Block({{0, 1}, {1, 1}, {2, 1}, {3, 61}});
  EXPECT_EQ(PrefillRuns(rows.data()), 4);
  EXPECT_GT(PrefillRuns(rows.data()), kPrefillMaxRuns);
  // 64 decode tokens: 64 runs.
  Rows decodes;
  for (int r = 0; r < kPrefillBlockRows; ++r) decodes[r] = r;
  EXPECT_EQ(PrefillRuns(decodes.data()), kPrefillBlockRows);
}

TEST(PrefillRunsTest, ASequenceSeenAgainLaterIsANewRun) {
  const Rows rows = Block({{4, 10}, {5, 10}, {4, 44}});
  EXPECT_EQ(Runs(rows), (std::vector<std::array<int, 3>>{{4, 0, 10}, {5, 10, 20}, {4, 20, 64}}));
}

TEST(PrefillRunsTest, PaddingAloneHasNoRun) {
  const Rows rows = Block({});
  EXPECT_EQ(PrefillRuns(rows.data()), 0);
  int begin = -7, end = -7;
  EXPECT_EQ(NextPrefillRun(rows.data(), 0, &begin, &end), -1);
  EXPECT_EQ(begin, kPrefillBlockRows);
  EXPECT_EQ(end, kPrefillBlockRows);
}

}  // namespace
}  // namespace rtgen::kernels
