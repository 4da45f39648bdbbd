// A long prompt that arrives while streams are decoding is prefilled in chunks of the step
// budget, and every running stream still gets one token per step meanwhile. Measured in engine
// steps (EngineObserver::OnStep), not wall time, so it holds on a loaded machine.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/engine.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

// Numbers every step; sinks (called on the engine thread inside a step, before OnStep) read the
// current number, so a chunk is stamped with the index of the step that produced it.
struct StepLog : EngineObserver {
  absl::Mutex mu;
  int32_t step = 0;
  std::vector<int32_t> prefill_tokens;  // per step
  void OnStep(const StepReport& report) override {
    absl::MutexLock lock(&mu);
    prefill_tokens.push_back(report.prompt_tokens);
    ++step;
  }
  int32_t Now() {
    absl::MutexLock lock(&mu);
    return step;
  }
};

struct Stamped {
  absl::Mutex mu;
  std::vector<int32_t> token_steps;  // the step of each token chunk
  absl::Notification done;
  StreamSink Sink(StepLog* log) {
    return [this, log](StreamChunk c) {
      const int32_t step = log->Now();
      {
        absl::MutexLock lock(&mu);
        for (size_t i = 0; i < c.token_ids.size(); ++i) token_steps.push_back(step);
      }
      if (c.finish != FinishReason::kNone) done.Notify();
    };
  }
  size_t count() {
    absl::MutexLock lock(&mu);
    return token_steps.size();
  }
};

TEST(LongPromptNoStallTest, RunningStreamsGetATokenEveryStepDuringChunkedPrefill) {
  constexpr int32_t kBudget = 64;
  constexpr int32_t kStreams = 4;
  constexpr int32_t kLongPrompt = 1200;
  FakeTokenizer tok;
  StepLog log;
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = kBudget;
  config.max_model_len = 2048;
  auto backend = std::make_unique<FakeBackend>();
  backend->SetStepDelay(absl::Microseconds(300));  // a step costs time, like a real backend
  auto engine_or = Engine::Create(config, std::move(backend), &tok, &log);
  ASSERT_TRUE(engine_or.ok()) << engine_or.status();
  std::unique_ptr<Engine> engine = std::move(*engine_or);

  std::vector<std::unique_ptr<Stamped>> streams;
  for (int32_t i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<Stamped>());
    ASSERT_TRUE(engine
                    ->Submit(MakeRequest("s" + std::to_string(i), Range(10 + i, 8), 1500),
                             streams.back()->Sink(&log))
                    .ok());
  }
  // Wait until every stream is decoding.
  for (auto& s : streams) {
    for (int i = 0; i < 20000 && s->count() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_GE(s->count(), 3u);
  }
  Stamped long_stream;
  const int32_t submit_step = log.Now();
  std::vector<int32_t> long_prompt;
  for (int32_t i = 0; i < kLongPrompt; ++i) long_prompt.push_back(1 + (i * 7) % 250);
  ASSERT_TRUE(engine->Submit(MakeRequest("long", long_prompt, 1), long_stream.Sink(&log)).ok());
  ASSERT_TRUE(long_stream.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const int32_t first_token_step = long_stream.token_steps.at(0);
  for (int32_t i = 0; i < kStreams; ++i) engine->Cancel("s" + std::to_string(i));
  for (auto& s : streams) ASSERT_TRUE(s->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  engine->Shutdown();

  // The prompt was chunked: it took at least ceil(prompt / (budget - decodes)) steps, and no step
  // ran more than the budget.
  absl::MutexLock lock(&log.mu);
  int32_t prefill_steps = 0;
  int32_t prefilled = 0;
  for (int32_t s = submit_step; s <= first_token_step; ++s) {
    const int32_t n = log.prefill_tokens.at(static_cast<size_t>(s));
    EXPECT_LE(n, kBudget - kStreams) << "step " << s;
    if (n > 0) ++prefill_steps;
    prefilled += n;
  }
  EXPECT_EQ(prefilled, kLongPrompt);
  EXPECT_GE(prefill_steps, (kLongPrompt + kBudget - kStreams - 1) / (kBudget - kStreams));

  // Every running stream got exactly one token in every step of that window: its largest gap is
  // one step, not the ~20 steps the whole prompt took.
  for (int32_t i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    std::vector<int32_t> in_window;
    for (int32_t step : streams[static_cast<size_t>(i)]->token_steps) {
      if (step >= submit_step && step <= first_token_step) in_window.push_back(step);
    }
    ASSERT_EQ(static_cast<int32_t>(in_window.size()), first_token_step - submit_step + 1);
    int32_t max_gap = 0;
    for (size_t k = 1; k < in_window.size(); ++k) {
      max_gap = std::max(max_gap, in_window[k] - in_window[k - 1]);
    }
    EXPECT_EQ(max_gap, 1);
  }
}

}  // namespace
}  // namespace rtgen::testing
