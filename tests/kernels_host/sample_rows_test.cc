// The host side of device sampling (kernels/sample_rows.h), without a GPU: which rows the CUDA
// backend leaves to the CPU sampler (long penalty lists, more top-n logprobs than the device
// returns) and the parameters every other row hands the device sampler (its draw counted by the
// tokens generated so far, as the CPU sampler counts it).

#include "kernels/sample_rows.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sample_penalties.h"

namespace rtgen {
namespace {

TEST(SampleRowsTest, DeviceParamsCarryTheRequestAndCountItsOutput) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.logprobs = 3;
  const std::vector<int32_t> prompt = {1, 2, 3}, output = {4, 5, 6, 7, 8};
  const kernels::SampleRowParams d = DeviceParams(SampleRequest{0, &p, prompt, output, 1234});
  EXPECT_EQ(d.temperature, 0.8f);
  EXPECT_EQ(d.top_k, 40);
  EXPECT_EQ(d.top_p, 0.9f);
  EXPECT_EQ(d.min_p, 0.05f);
  EXPECT_EQ(d.seed, 1234u);
  EXPECT_EQ(d.counter, 5u);  // the draw after five generated tokens
  EXPECT_EQ(d.top_logprobs, 3);
  EXPECT_EQ(d.repetition_penalty, 1.0f);  // penalties are the entry builder's
}

TEST(SampleRowsTest, TemperaturesBelowTheGreedyBoundReachTheDeviceAsGreedy) {
  // The device sampler takes temperature 0 alone as greedy; the CPU sampler anything below
  // kGreedyBelowTemperature. A tiny temperature must mean the same on both.
  SamplingParams p;
  p.temperature = 1e-38f;
  const kernels::SampleRowParams d = DeviceParams(SampleRequest{0, &p, {}, {}, 1});
  EXPECT_EQ(d.temperature, 0.0f);
  p.temperature = 0.5f;
  EXPECT_EQ(DeviceParams(SampleRequest{0, &p, {}, {}, 1}).temperature, 0.5f);
}

TEST(SampleRowsTest, HostSamplesLongPenaltyListsAndManyLogprobs) {
  const std::vector<int32_t> prompt(100, 7), output(50, 9);
  SamplingParams greedy;
  EXPECT_FALSE(NeedsHostSampling(SampleRequest{0, &greedy, prompt, output, 0}, 16));
  SamplingParams penalized;
  penalized.repetition_penalty = 1.2f;  // reads prompt and output: 150 tokens
  EXPECT_FALSE(NeedsHostSampling(SampleRequest{0, &penalized, prompt, output, 0}, 150));
  EXPECT_TRUE(NeedsHostSampling(SampleRequest{0, &penalized, prompt, output, 0}, 149));
  EXPECT_TRUE(NeedsHostSampling(SampleRequest{0, &penalized, prompt, output, 0}, 0));
  SamplingParams presence;
  presence.presence_penalty = 0.5f;  // reads the output only: 50 tokens
  EXPECT_FALSE(NeedsHostSampling(SampleRequest{0, &presence, prompt, output, 0}, 50));
  EXPECT_TRUE(NeedsHostSampling(SampleRequest{0, &presence, prompt, output, 0}, 49));
  SamplingParams many;
  many.logprobs = kernels::kMaxTopLogprobs + 1;
  EXPECT_TRUE(NeedsHostSampling(SampleRequest{0, &many, prompt, output, 0}, 4096));
  many.logprobs = kernels::kMaxTopLogprobs;
  EXPECT_FALSE(NeedsHostSampling(SampleRequest{0, &many, prompt, output, 0}, 4096));
}

}  // namespace
}  // namespace rtgen
