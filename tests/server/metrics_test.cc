// Metrics: how a step ran lands on the documented series (rtgen_graph_replays_total{bucket},
// rtgen_eager_steps_total{reason}); prefill graph replays carry bucket="prefill_<tokens>".

#include "server/metrics.h"

#include <string>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(MetricsTest, StepsCountByHowTheyRan) {
  Metrics m({0.001, 0.01});
  m.PreRegisterGraphBuckets({1, 4}, {16, 128});
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"1\"} 0")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_128\"} 0")) << text;

  m.OnStep(3, 0, 3, /*graph_replayed=*/true, 4);     // decode, bucket 4
  m.OnStep(1, 100, 1, /*graph_replayed=*/true, 128);  // one prefill chunk, token bucket 128
  m.OnStep(1, 100, 1, /*graph_replayed=*/true, 128);
  m.OnStep(2, 900, 1, /*graph_replayed=*/false, 0);   // eager prefill
  m.OnStep(300, 0, 300, /*graph_replayed=*/false, 0);  // eager decode
  m.OnStep(1, 20, 1, /*graph_replayed=*/true, 2048);  // past the cached range: still counted
  text = m.Render();
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"4\"} 1")) << text;
  EXPECT_EQ(text.find("{bucket=\"128\"}"), std::string::npos) << text;  // not a decode bucket
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_128\"} 2")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_16\"} 0")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_2048\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_eager_steps_total{reason=\"prefill\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_eager_steps_total{reason=\"decode\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_prompt_tokens_total 1120")) << text;
}

}  // namespace
}  // namespace rtgen
