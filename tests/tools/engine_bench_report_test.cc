// rtgen-engine-bench's figures: the bandwidth floor's bytes (tied and untied embeddings, the KV at
// the run's mean context), a graph row's tokens/s, floor share and achieved GB/s, the eager run's
// speed-up and token match, the median, and the summary table printed from them.

#include "tools/engine_bench_report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/median.h"

namespace rtgen::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelConfig Shape(bool tied) {
  ModelConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.tie_word_embeddings = tied;
  return c;
}

TEST(EngineBenchReportTest, FloorBytesCountTheLmHeadOnceAndTheMeanContextsKv) {
  // Contexts prompt + 1 .. prompt + steps: mean prompt + (steps + 1) / 2 = 128 + 64.5.
  const StepBytes tied = FloorBytes(Shape(true), 5'000'000, 1000, 128, 128);
  EXPECT_DOUBLE_EQ(tied.weights, 5'000'000.0);
  EXPECT_DOUBLE_EQ(tied.kv_per_seq, 192.5 * 1000);
  // Untied: the bf16 embedding table (2 bytes x 1000 x 64) is gathered by rows, not streamed.
  const StepBytes untied = FloorBytes(Shape(false), 5'000'000, 1000, 128, 128);
  EXPECT_DOUBLE_EQ(untied.weights, 5'000'000.0 - 128'000.0);
  EXPECT_DOUBLE_EQ(FloorBytes(Shape(true), 1, 10, 0, 1).kv_per_seq, 10.0);
}

TEST(EngineBenchReportTest, FloorIsTheStepsBytesOverTheCopyBandwidth) {
  const StepBytes bytes{1e9, 1e6};
  EXPECT_DOUBLE_EQ(FloorMs(bytes, 1, 2e12), 0.5005);
  EXPECT_DOUBLE_EQ(FloorMs(bytes, 4, 2e12), 0.502);
  EXPECT_DOUBLE_EQ(FloorMs(bytes, 4, 1e12), 1.004);
}

TEST(EngineBenchReportTest, GraphRowCarriesTokensPerSecondFloorShareAndAchievedBandwidth) {
  DecodeResult graph;
  graph.tpot_ms = 1.25;
  graph.tpot_built_ms = 1.5;
  graph.tpot_pipelined_ms = 1.2;
  graph.pipelined_tokens_equal = 1.0;
  graph.graph_replayed = true;
  const Json row = GraphDecodeRow(4, graph, StepBytes{1e9, 1e6}, 2e12);
  EXPECT_EQ(row["batch"], 4);
  EXPECT_DOUBLE_EQ(row["tpot_ms"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(row["tpot_inputs_built_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(row["tpot_pipelined_ms"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(row["tok_s"].get<double>(), 3200.0);  // 4 tokens a 1.25 ms step
  EXPECT_DOUBLE_EQ(row["floor_ms"].get<double>(), 0.502);
  EXPECT_DOUBLE_EQ(row["floor_fraction"].get<double>(), 0.502 / 1.25);
  // 1.004 GB a step in 1.25 ms; with the floor share this is the copy bandwidth's share.
  EXPECT_DOUBLE_EQ(row["achieved_gbs"].get<double>(), 1.004e9 / 1.25e-3 / 1e9);
  EXPECT_NEAR(row["achieved_gbs"].get<double>() / 2000.0, row["floor_fraction"].get<double>(),
              1e-12);
  EXPECT_TRUE(row["graph_replayed"].get<bool>());
}

// Runs not made (no built repeats, no pipelined run) are null, not a 0 ms TPOT or a 0 share of
// equal tokens.
TEST(EngineBenchReportTest, GraphRowHasNullForRunsNotMade) {
  DecodeResult graph;
  graph.tpot_ms = 1.25;
  const Json row = GraphDecodeRow(4, graph, StepBytes{1e9, 1e6}, 2e12);
  EXPECT_TRUE(row["tpot_inputs_built_ms"].is_null()) << row.dump();
  EXPECT_TRUE(row["tpot_pipelined_ms"].is_null()) << row.dump();
  EXPECT_TRUE(row["pipelined_tokens_equal"].is_null()) << row.dump();
  EXPECT_DOUBLE_EQ(row["tpot_ms"].get<double>(), 1.25);
}

TEST(EngineBenchReportTest, EagerFiguresAreTheSpeedUpAndTheTokensMatchedInPlace) {
  DecodeResult graph, eager;
  graph.tpot_ms = 0.5;
  graph.tokens = {1, 2, 3, 4};
  eager.tpot_ms = 1.5;
  eager.tokens = {1, 2, 9, 4, 5};  // one differs; the extra token is not counted
  Json row = Json::object();
  AddEagerFigures(eager, graph, row);
  EXPECT_DOUBLE_EQ(row["eager_tpot_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(row["graph_speedup"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(row["greedy_tokens_equal_eager"].get<double>(), 0.75);

  eager.tokens = {1, 2};  // a shorter eager run matches at most its own tokens
  AddEagerFigures(eager, graph, row);
  EXPECT_DOUBLE_EQ(row["greedy_tokens_equal_eager"].get<double>(), 0.5);
  graph.tokens.clear();
  AddEagerFigures(eager, graph, row);
  EXPECT_DOUBLE_EQ(row["greedy_tokens_equal_eager"].get<double>(), 0.0);
}

TEST(EngineBenchReportTest, MedianOfOddEvenAndNoRuns) {
  EXPECT_DOUBLE_EQ(Median({}), 0.0);
  EXPECT_DOUBLE_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(Median({7.0}), 7.0);
}

TEST(EngineBenchReportTest, TablePrintsEachDecodeRowAndTtftAndSkipsFailedModels) {
  DecodeResult graph, eager;
  graph.tpot_ms = 1.25;
  graph.tokens = {1, 2};
  eager.tpot_ms = 2.5;
  eager.tokens = {1, 2};
  Json row = GraphDecodeRow(4, graph, StepBytes{1e9, 1e6}, 2e12);
  AddEagerFigures(eager, graph, row);
  Json models;
  models["smollm2-135m"] = Json{{"decode", Json::array({row})},
                                {"ttft_ms", Json{{"128", 1.25}, {"2048", 4.5}}}};
  models["llama3-8b"] = Json{{"error", "out of memory"}};
  ::testing::internal::CaptureStdout();
  PrintTable(models);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(out, HasSubstr("GB/s"));
  // batch, TPOT, tokens/s, floor, floor share, GB/s, eager TPOT, speed-up, tokens matched.
  // No built or pipelined run: "-" in their columns.
  EXPECT_THAT(out, HasSubstr("smollm2-135m       4      1.250          -        -"));
  EXPECT_THAT(out, HasSubstr("3200.0     0.502   40.2%     803      2.500    2.00  1.000"));
  EXPECT_THAT(out, HasSubstr("TTFT batch 1:  prompt 128 1.25 ms  prompt 2048 4.50 ms"));
  EXPECT_THAT(out, Not(HasSubstr("llama3-8b")));
}

}  // namespace
}  // namespace rtgen::tools
