// rtgen-engine-bench's timed runs on the CPU backend over a tiny random model: the decode runs
// give the greedy tokens of a naive reference forward pass (so every restart of a run starts from
// the prefill's state), pipelined runs give the same tokens where the backend takes PendingToken
// stand-ins (and fail where it does not), TTFT and mixed steps run, and the trace gets one more
// step.

#include "tools/engine_bench_timing.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cpu/tiny_model.h"
#include "tests/engine/resolve_pending_tokens.h"

namespace rtgen::tools {
namespace {

using ::testing::HasSubstr;

class EngineBenchTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyConfig();
    weights_ = testing::TinyWeights(config_, 17);
    absl::StatusOr<std::unique_ptr<CpuBackend>> b =
        CpuBackend::Create(config_, weights_, {1, WeightDtype::kF32});
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    ASSERT_TRUE(backend_->AllocateKvCache({64, kBenchBlockSize}).ok());
    o_.prompt = 12;
    o_.steps = 5;
    o_.repeats = 2;
    o_.ttft_repeats = 2;
    o_.seed = 3;
  }

  // Sequence s's greedy tokens after its prompt (the prefill's first, then o_.steps decoded),
  // from the naive forward pass over the whole sequence each time.
  std::vector<int32_t> ReferenceGreedy(const BenchBatch& batch, int32_t s) const {
    std::vector<int32_t> seq;
    for (int32_t p = 0; p < o_.prompt; ++p) {
      seq.push_back(batch.PromptToken(s, p, config_.vocab_size));
    }
    std::vector<int32_t> out;
    for (int32_t i = 0; i <= o_.steps; ++i) {
      const std::vector<double> logits = testing::ReferenceLogits(config_, weights_, seq);
      const int32_t t = static_cast<int32_t>(
          std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(t);
      seq.push_back(t);
    }
    return out;
  }

  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<CpuBackend> backend_;
  EngineBenchOptions o_;
};

TEST_F(EngineBenchTimingTest, DecodeRunsGiveTheReferenceGreedyTokens) {
  constexpr int32_t kBatch = 3;
  absl::StatusOr<DecodeResult> r = TimeDecode(*backend_, config_, o_, kBatch, 1, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->tpot_ms, 0.0);
  ASSERT_TRUE(r->tpot_built_ms.has_value());
  EXPECT_GT(*r->tpot_built_ms, 0.0);
  EXPECT_FALSE(r->tpot_pipelined_ms.has_value());  // not run: no figure
  EXPECT_FALSE(r->pipelined_tokens_equal.has_value());
  EXPECT_FALSE(r->graph_replayed);  // the CPU backend has no graphs
  ASSERT_EQ(r->tokens.size(), static_cast<size_t>(kBatch * o_.steps));
  const BenchBatch prompts(kBatch, 1, o_.seed);  // the same seeded prompts
  for (int32_t s = 0; s < kBatch; ++s) {
    const std::vector<int32_t> want = ReferenceGreedy(prompts, s);
    for (int32_t i = 0; i < o_.steps; ++i) {
      EXPECT_EQ(r->tokens[i * kBatch + s], want[i + 1]) << "sequence " << s << " step " << i;
    }
  }
}

TEST_F(EngineBenchTimingTest, TraceGetsOneMoreStep) {
  int calls = 0;
  DecodeStepTrace trace = [&](const std::function<absl::Status()>& one_step) {
    ++calls;
    return one_step();
  };
  ASSERT_TRUE(TimeDecode(*backend_, config_, o_, 1, 0, false, trace).ok());
  EXPECT_EQ(calls, 1);
  DecodeStepTrace failing = [](const std::function<absl::Status()>&) {
    return absl::InternalError("trace failed");
  };
  absl::StatusOr<DecodeResult> r = TimeDecode(*backend_, config_, o_, 1, 0, false, failing);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("trace failed"));
}

// A backend that hands the calls every backend has to `inner` (Launch, Collect and
// OverlapsSteps stay Backend's own); the test backends below change one or two.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}
  std::string name() const override { return "forwarding to " + inner_.name(); }
  absl::Status AllocateKvCache(const KvCacheShape& shape) override {
    return inner_.AllocateKvCache(shape);
  }
  int64_t KvBytesPerBlock(int32_t block_size) const override {
    return inner_.KvBytesPerBlock(block_size);
  }
  absl::StatusOr<StepOutput> Execute(const StepInput& input) override {
    return inner_.Execute(input);
  }
  absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput& input) override {
    return inner_.ComputeLogits(input);
  }

 protected:
  Backend& inner_;
};

// The CPU backend behind a Launch that takes PendingToken stand-ins, as the CUDA backend does:
// each names a sample of the step launched just before, whose tokens are known here (the CPU
// backend runs a step inside Launch), and is replaced by it before the step runs (as the engine
// tests' fake backend does: tests/engine/resolve_pending_tokens.h).
class ResolvingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Launch(const StepInput& input) override {
    StepInput resolved;
    std::vector<std::vector<int32_t>> outputs;  // what resolved's samples' outputs point to
    const absl::Status named = testing::ResolvePendingTokens(input, previous_, &resolved, &outputs);
    absl::StatusOr<StepOutput> out = named.ok() ? inner_.Execute(resolved) : named;
    previous_.clear();
    if (out.ok()) {
      for (const SampledToken& t : out->sampled) previous_.push_back(t.token_id);
    }
    launched_.push_back(std::move(out));
    ++launches_;
    return absl::OkStatus();
  }
  absl::StatusOr<StepOutput> Collect() override {
    absl::StatusOr<StepOutput> out = std::move(launched_.front());
    launched_.pop_front();
    return out;
  }
  bool OverlapsSteps() const override { return true; }
  int launches() const { return launches_; }

 private:
  std::vector<int32_t> previous_;  // the tokens the step launched last sampled
  std::deque<absl::StatusOr<StepOutput>> launched_;
  int launches_ = 0;
};

TEST_F(EngineBenchTimingTest, PipelinedRunsGiveTheSerialRunsTokens) {
  ResolvingBackend backend(*backend_);
  absl::StatusOr<DecodeResult> r = TimeDecode(backend, config_, o_, 3, 0, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->tpot_pipelined_ms.has_value());
  EXPECT_GT(*r->tpot_pipelined_ms, 0.0);
  EXPECT_EQ(r->pipelined_tokens_equal, 1.0);
  EXPECT_FALSE(r->tpot_built_ms.has_value());  // no built repeats asked for
  // A warm-up of o_.steps and o_.repeats timed runs, a launch a step.
  EXPECT_EQ(backend.launches(), (1 + o_.repeats) * o_.steps);
}

TEST_F(EngineBenchTimingTest, PipelinedRunsNeedABackendThatTakesPendingTokens) {
  absl::StatusOr<DecodeResult> r = TimeDecode(*backend_, config_, o_, 2, 0, true);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("PendingToken"));
}

TEST_F(EngineBenchTimingTest, TtftAndMixedStepsRun) {
  absl::StatusOr<double> ttft = TimeTtft(*backend_, config_, o_, 40);
  ASSERT_TRUE(ttft.ok()) << ttft.status();
  EXPECT_GT(*ttft, 0.0);
  o_.mixed = {{2, 9}};
  absl::StatusOr<double> mixed = TimeMixed(*backend_, config_, o_, 2, 9);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_GT(*mixed, 0.0);
}

// The CPU backend, recording what every executed step's samples ask for.
class RecordingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::StatusOr<StepOutput> Execute(const StepInput& input) override {
    for (const SampleRequest& r : input.samples) {
      asked_.push_back(*r.params);
      history_.emplace_back(r.prompt.size(), r.output.size());
    }
    return inner_.Execute(input);
  }
  const std::vector<SamplingParams>& asked() const { return asked_; }
  // Each sample's (prompt, output) token counts its penalties read, in order.
  const std::vector<std::pair<size_t, size_t>>& history() const { return history_; }

 private:
  std::vector<SamplingParams> asked_;
  std::vector<std::pair<size_t, size_t>> history_;
};

// The window (the GPU's clocks in rtgen-engine-bench) covers the timed runs only: it opens after
// the prefill step and the warm-up's steps, and closes before the trace's step.
TEST_F(EngineBenchTimingTest, WindowCoversTheTimedRunsOnly) {
  RecordingBackend recording(*backend_);
  size_t at_start = 0, at_stop = 0;
  TimedWindow window;
  window.start = [&] { at_start = recording.asked().size(); };
  window.stop = [&] { at_stop = recording.asked().size(); };
  const DecodeStepTrace trace = [](const std::function<absl::Status()>& step) { return step(); };
  constexpr int32_t kBatch = 3;
  ASSERT_TRUE(TimeDecode(recording, config_, o_, kBatch, 1, false, trace, window).ok());
  // Rows sampled: the prefill samples each sequence once, a decode step every sequence.
  const size_t prefill = kBatch, warm_up = size_t{kBatch} * o_.steps;  // 5 steps < 16
  const size_t timed = size_t{kBatch} * o_.steps * (o_.repeats + 1);   // + 1 built run
  EXPECT_EQ(at_start, prefill + warm_up);
  EXPECT_EQ(at_stop, prefill + warm_up + timed);
  EXPECT_EQ(recording.asked().size(), at_stop + kBatch);  // the trace's step
}

// TTFT and mixed steps sample as the decode runs do: with --penalties and --logprobs, the
// settings the JSON reports for the whole run.
TEST_F(EngineBenchTimingTest, TtftAndMixedStepsSampleWithTheRunsSettings) {
  RecordingBackend recording(*backend_);
  o_.penalties = true;
  o_.logprobs = 2;
  o_.mixed = {{2, 9}};
  ASSERT_TRUE(TimeTtft(recording, config_, o_, 40).ok());
  // The TTFT step's penalties read its prompt, as a request's first step.
  ASSERT_FALSE(recording.history().empty());
  EXPECT_EQ(recording.history().back(), (std::pair<size_t, size_t>{40, 0}));
  const size_t before_mixed = recording.history().size();
  ASSERT_TRUE(TimeMixed(recording, config_, o_, 2, 9).ok());
  ASSERT_FALSE(recording.asked().empty());
  for (const SamplingParams& p : recording.asked()) {
    EXPECT_EQ(p.logprobs, 2);
    EXPECT_GT(p.repetition_penalty, 1.0f);
  }
  // The last mixed step: two decode rows (prompt, and the token their prefill sampled), then the
  // prompt row (its 9 tokens, nothing sampled yet).
  const auto& h = recording.history();
  ASSERT_GE(h.size(), before_mixed + 3);
  EXPECT_EQ(h[h.size() - 3], (std::pair<size_t, size_t>{12, 1}));
  EXPECT_EQ(h[h.size() - 2], (std::pair<size_t, size_t>{12, 1}));
  EXPECT_EQ(h[h.size() - 1], (std::pair<size_t, size_t>{9, 0}));
}

}  // namespace
}  // namespace rtgen::tools
