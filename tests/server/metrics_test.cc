// Metrics: how a step ran lands on the documented series (rtgen_graph_replays_total{bucket},
// rtgen_eager_steps_total{reason}); prefill graph replays carry bucket="prefill_<tokens>".

#include "server/metrics.h"

#include <string>
#include <utility>
#include <vector>

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

  const auto step = [&m](int32_t batch, int32_t prompt, bool prefill, bool replayed,
                         int32_t bucket) {
    m.OnStep({.batch_size = batch,
              .prompt_tokens = prompt,
              .generated = 1,
              .prefill = prefill,
              .graph_replayed = replayed,
              .bucket = bucket});
  };
  step(3, 0, false, true, 4);      // decode, bucket 4
  step(1, 100, true, true, 128);   // one prefill chunk, token bucket 128
  step(1, 100, true, true, 128);
  step(2, 900, true, false, 0);    // eager prefill
  step(300, 0, false, false, 0);   // eager decode
  step(1, 20, true, true, 2048);   // past the cached range: still counted
  // A decode-only step holding a prompt's last token (a chunk left it alone): a decode replay of
  // bucket 2, and one prompt token.
  step(2, 1, false, true, 2);
  text = m.Render();
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"4\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"2\"} 1")) << text;
  EXPECT_EQ(text.find("prefill_2\""), std::string::npos) << text;
  EXPECT_EQ(text.find("{bucket=\"128\"}"), std::string::npos) << text;  // not a decode bucket
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_128\"} 2")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_16\"} 0")) << text;
  EXPECT_TRUE(Has(text, "rtgen_graph_replays_total{bucket=\"prefill_2048\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_eager_steps_total{reason=\"prefill\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_eager_steps_total{reason=\"decode\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_prompt_tokens_total 1121")) << text;
}

// The quantile Prometheus' histogram_quantile gives for `name` in `text` (linear within the
// bucket that holds the rank, from the bucket below's bound).
double Quantile(const std::string& text, const std::string& name, double q) {
  std::vector<std::pair<double, double>> buckets;  // {le, cumulative count}
  const std::string prefix = name + "_bucket{le=\"";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    const size_t le_end = text.find('"', at + prefix.size());
    const std::string le = text.substr(at + prefix.size(), le_end - at - prefix.size());
    const double count = std::stod(text.substr(text.find(' ', le_end) + 1));
    buckets.push_back({le == "+Inf" ? 1e300 : std::stod(le), count});
  }
  const double rank = q * buckets.back().second;
  double lower = 0.0, below = 0.0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank) return lower + (le - lower) * (rank - below) / (count - below);
    lower = le;
    below = count;
  }
  return lower;
}

// The default bounds resolve the GPU's sub-millisecond token gaps: gaps all at 0.55 ms read as a
// p50 and p99 within 15 % of it (with bounds at 0.5 and 1 ms only, 0.75 and 0.995 ms), and at
// 0.45 ms they read apart from 0.55 ms.
TEST(MetricsTest, DefaultBucketsResolveSubMillisecondTokenGaps) {
  for (const double gap : {0.00045, 0.00055, 0.00085}) {
    Metrics m(DefaultLatencyBuckets());
    for (int i = 0; i < 1000; ++i) m.OnToken(absl::Seconds(gap), /*first=*/false);
    const std::string text = m.Render();
    for (const double q : {0.5, 0.99}) {
      const double got = Quantile(text, "rtgen_time_per_output_token_seconds", q);
      EXPECT_NEAR(got, gap, 0.15 * gap) << "gap " << gap << " q " << q << "\n" << text;
    }
  }
}

// A duration the wall clock made negative (an NTP step back between arrival and a token) is
// observed as 0: the _sum of a histogram never goes down, which rate() would read as a reset.
TEST(MetricsTest, ANegativeDurationIsObservedAsZero) {
  Metrics m({0.001, 0.01});
  m.OnToken(absl::Milliseconds(5), /*first=*/true);
  m.OnToken(absl::Seconds(-3), /*first=*/true);
  m.OnFirstScheduled(absl::Seconds(-1));
  const std::string text = m.Render();
  EXPECT_TRUE(Has(text, "rtgen_time_to_first_token_seconds_sum 0.005")) << text;
  EXPECT_TRUE(Has(text, "rtgen_time_to_first_token_seconds_bucket{le=\"0.001\"} 1")) << text;
  EXPECT_TRUE(Has(text, "rtgen_queue_time_seconds_sum 0")) << text;
}

}  // namespace
}  // namespace rtgen
