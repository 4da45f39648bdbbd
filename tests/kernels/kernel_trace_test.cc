// The diagnostic kernel trace (kernels/kernel_trace.h): in a build that traces its kernels, two
// chained launches come back as two grids in launch order with every block recorded, the second
// past its PDL wait no earlier than the first ended; in any other build it says it is not
// compiled in.

#include "kernels/kernel_trace.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rms_norm.h"
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
  }
  EXPECT_EQ((*spans)[0].first_start_us, 0.0);
  // The second waits for the first grid to complete.
  EXPECT_GE((*spans)[1].first_wait_us, (*spans)[0].last_end_us);
  const std::string table = kernels::FormatKernelTimeline(*spans);
  EXPECT_NE(table.find("rms_norm"), std::string::npos) << table;
}

}  // namespace
}  // namespace rtgen::testing_gpu
