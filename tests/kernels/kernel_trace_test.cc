// The diagnostic kernel trace (kernels/kernel_trace.h): in a build that traces its kernels, two
// chained launches come back as two grids in launch order with every block recorded, the second
// past its PDL wait no earlier than the first ended, and the marks a kernel's blocks pass are
// counted and timed; in any other build it says it is not compiled in.

#include "kernels/kernel_trace.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rms_norm.h"
#include "kernels/sampling.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

TEST(KernelTraceTest, RecordsEachGridOfAStepInOrder) {
  if (!kernels::KernelTraceCompiledIn()) {
    EXPECT_EQ(kernels::KernelTraceBegin().code(), absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "not a kernel-trace build (-DRTGEN_KERNEL_TRACE=ON)";
  }
  std::mt19937_64 rng(FreshSeed());
  const int rows = 37, hidden = 576;
  DeviceArray<float> residual(RandomNormal(size_t{1} * rows * hidden, 1.0f, rng));
  DeviceArray<float> weight(RandomNormal(hidden, 1.0f, rng));
  DeviceArray<uint16_t> out(size_t{1} * rows * hidden);
  const kernels::RmsNormParams p{residual.get(), nullptr, nullptr, weight.get(), out.bf16(),
                                 rows,           hidden,  1e-5f};
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_TRUE(kernels::KernelTraceBegin().ok());
  GPU_CHECK(kernels::RmsNorm(p, stream));
  GPU_CHECK(kernels::RmsNorm(p, stream));
  const absl::StatusOr<std::vector<kernels::KernelSpan>> spans = kernels::KernelTraceEnd();
  GPU_CHECK(cudaStreamDestroy(stream));
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 2u);
  for (const kernels::KernelSpan& s : *spans) {
    EXPECT_EQ(s.tag, kernels::TraceTag::kRmsNorm);
    EXPECT_EQ(s.blocks, rows);  // one block per row
    EXPECT_TRUE(s.waited);
    EXPECT_LE(s.first_start_us, s.first_wait_us);
    EXPECT_LE(s.first_wait_us, s.last_wait_us);
    EXPECT_LE(s.last_wait_us, s.last_end_us);
    EXPECT_EQ(s.marked_blocks, 0);  // the norm has no marks
  }
  EXPECT_EQ((*spans)[0].first_start_us, 0.0);
  // The second waits for the first grid to complete.
  EXPECT_GE((*spans)[1].first_wait_us, (*spans)[0].last_end_us);
  const std::string table = kernels::FormatKernelTimeline(*spans);
  EXPECT_NE(table.find("rms_norm"), std::string::npos) << table;
}

// Marks inside a kernel: every block of a greedy row split over blocks passes mark 0 (thread 0's
// ids read) and then mark 1 (the block's state combined).
TEST(KernelTraceTest, RecordsTheMarksTheBlocksPass) {
  if (!kernels::KernelTraceCompiledIn()) GTEST_SKIP() << "not a kernel-trace build";
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 49152, splits = 8;
  DeviceArray<float> logits(RandomNormal(vocab, 1.0f, rng));
  DeviceArray<kernels::SampleRowParams> rows(std::vector<kernels::SampleRowParams>(1));
  DeviceArray<int32_t> token(1), counter(std::vector<int32_t>{0});
  DeviceArray<float> logprob(1);
  DeviceArray<uint8_t> states(splits * kernels::kSampleSplitStateBytes);
  kernels::SampleTokensParams p{logits.get(), vocab, rows.get(), token.get(), logprob.get(), 1,
                                vocab};
  p.splits = splits;
  p.split_states = states.get();
  p.split_counters = counter.get();
  ASSERT_TRUE(kernels::KernelTraceBegin().ok());
  GPU_CHECK(kernels::SampleTokens(p, nullptr));
  const absl::StatusOr<std::vector<kernels::KernelSpan>> spans = kernels::KernelTraceEnd();
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 1u);
  const kernels::KernelSpan& s = (*spans)[0];
  EXPECT_EQ(s.tag, kernels::TraceTag::kSample);
  EXPECT_EQ(s.blocks, splits);
  EXPECT_EQ(s.marked_blocks, splits);
  EXPECT_GT(s.median_to_mark0_us, 0.0);
  EXPECT_GE(s.median_mark0_to_mark1_us, 0.0);  // shuffles and barriers: maybe under a tick
  EXPECT_LE(s.median_to_mark0_us + s.median_last_mark_to_end_us, s.last_end_us);
  const std::string table = kernels::FormatKernelTimeline(*spans);
  EXPECT_NE(table.find("marks: 8 blocks"), std::string::npos) << table;
}

}  // namespace
}  // namespace rtgen::testing_gpu
