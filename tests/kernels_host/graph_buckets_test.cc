// The graph bucket policy (kernels/graph_buckets.h), without a GPU: the decode batch buckets
// (ARCHITECTURE.md: 1, 2, 4, 8, 16, 24, 32, then every 16 up to the max batch), the prefill
// token buckets, the multi-sequence graphs' sequence counts, and when padding a prefill step up
// to a bucket pays. The graphs themselves are tested on the GPU (tests/kernels/
// graph_runner_test.cc, prefill_graph_test.cc, mixed_graph_test.cc).

#include "kernels/graph_buckets.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

TEST(GraphBucketsTest, DecodeBatchBuckets) {
  EXPECT_EQ(DefaultGraphBuckets(100),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 100}));
  EXPECT_EQ(DefaultGraphBuckets(3), (std::vector<int32_t>{1, 2, 3}));
}

TEST(GraphBucketsTest, PrefillTokenBuckets) {
  EXPECT_EQ(DefaultPrefillGraphTokens(512),
            (std::vector<int32_t>{16, 32, 48, 64, 96, 128, 192, 256, 384, 512}));
  EXPECT_EQ(DefaultPrefillGraphTokens(1000),
            (std::vector<int32_t>{16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1000}));
  EXPECT_EQ(DefaultPrefillGraphTokens(100), (std::vector<int32_t>{16, 32, 48, 64, 96, 100}));
  EXPECT_EQ(DefaultPrefillGraphTokens(40), (std::vector<int32_t>{16, 32, 40}));
  EXPECT_EQ(DefaultPrefillGraphTokens(8), (std::vector<int32_t>{8}));
  EXPECT_TRUE(DefaultPrefillGraphTokens(0).empty());
}

TEST(GraphBucketsTest, MixedSequenceCounts) {
  EXPECT_EQ(DefaultMixedGraphSeqs(16, 256), (std::vector<int32_t>{2, 4, 8, 16}));
  EXPECT_EQ(DefaultMixedGraphSeqs(48, 256), (std::vector<int32_t>{2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(DefaultMixedGraphSeqs(512, 20), (std::vector<int32_t>{2, 4, 8, 16, 20}));
  EXPECT_EQ(DefaultMixedGraphSeqs(2, 8), (std::vector<int32_t>{2}));
  EXPECT_TRUE(DefaultMixedGraphSeqs(1, 8).empty());
  EXPECT_TRUE(DefaultMixedGraphSeqs(16, 1).empty());
}

// Layer parameters (qkv, o, gate/up, down) of the three benchmark shapes.
constexpr int64_t kSmolLayer = 576 * 960 + 576 * 576 + 576 * 2 * 1536 + 1536 * 576;
constexpr int64_t k1bLayer = 2048 * 3072 + 2048 * 2048 + 2048 * 2 * 8192 + 8192 * 2048;
constexpr int64_t k8bLayer =
    int64_t{4096} * 6144 + 4096 * 4096 + int64_t{4096} * 2 * 14336 + int64_t{14336} * 4096;

TEST(GraphBucketsTest, PaddingPaysWhereTheLaunchesSavedOutweighIt) {
  // SmolLM2-135M: any chunk (0.28 us a padding token past 128 against 0.18 ms saved).
  EXPECT_TRUE(PrefillPaddingPays(kSmolLayer, 30, 1, 16));
  EXPECT_TRUE(PrefillPaddingPays(kSmolLayer, 30, 129, 512));
  // Llama-3.2-1B: up to ~37 tokens past 128 (2.6 us each against 96 us).
  EXPECT_TRUE(PrefillPaddingPays(k1bLayer, 16, 100, 128));
  EXPECT_TRUE(PrefillPaddingPays(k1bLayer, 16, 230, 256));
  EXPECT_FALSE(PrefillPaddingPays(k1bLayer, 16, 200, 256));
  EXPECT_FALSE(PrefillPaddingPays(k1bLayer, 16, 129, 192));
  // Llama-3-8B: ~10 tokens past 128 (18.6 us each against 0.19 ms), ~34 below it (5.6 us).
  EXPECT_TRUE(PrefillPaddingPays(k8bLayer, 32, 250, 256));
  EXPECT_TRUE(PrefillPaddingPays(k8bLayer, 32, 100, 128));
  EXPECT_TRUE(PrefillPaddingPays(k8bLayer, 32, 65, 96));
  EXPECT_FALSE(PrefillPaddingPays(k8bLayer, 32, 17, 64));
  EXPECT_FALSE(PrefillPaddingPays(k8bLayer, 32, 129, 192));
  EXPECT_FALSE(PrefillPaddingPays(k8bLayer, 32, 257, 512));
  EXPECT_TRUE(PrefillPaddingPays(k8bLayer, 32, 512, 512));
}

}  // namespace
}  // namespace rtgen
