#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

// A thread-safe recorder whose final chunk fires a notification.
struct Stream {
  absl::Mutex mu;
  Recorded rec;
  absl::Notification done;
  StreamSink Sink() {
    return [this](StreamChunk c) {
      const bool last = c.finish != FinishReason::kNone;
      {
        absl::MutexLock lock(&mu);
        if (last) ++rec.finals;
        rec.chunks.push_back(std::move(c));
      }
      if (last && !done.HasBeenNotified()) done.Notify();
    };
  }
  bool Wait() { return done.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  size_t num_chunks() {
    absl::MutexLock lock(&mu);
    return rec.chunks.size();
  }
};

struct CountingObserver : EngineObserver {
  std::atomic<int> steps{0}, first_scheduled{0}, tokens{0}, first_tokens{0}, finished{0},
      preemptions{0}, cache_hit_tokens{0};
  void OnStep(const StepReport&) override { ++steps; }
  void OnFirstScheduled(absl::Duration) override { ++first_scheduled; }
  void OnToken(absl::Duration, bool first) override {
    ++tokens;
    if (first) ++first_tokens;
  }
  void OnFinished(FinishReason, const Usage&) override { ++finished; }
  void OnPreemption() override { ++preemptions; }
  void OnPrefixCacheHit(int32_t n) override { cache_hit_tokens += n; }
};

class EngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> Make(EngineConfig config = EngineConfig(),
                               EngineObserver* observer = nullptr) {
    auto backend = std::make_unique<FakeBackend>();
    backend_ = backend.get();
    auto engine = Engine::Create(config, std::move(backend), &tok_, observer);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(engine).value();
  }
  FakeTokenizer tok_;
  FakeBackend* backend_ = nullptr;
};

TEST_F(EngineTest, GeneratesTheGreedyStreamWithUsage) {
  CountingObserver obs;
  auto engine = Make(EngineConfig(), &obs);
  Stream s;
  ASSERT_TRUE(engine->Submit(MakeRequest("r1", Range(1, 20), 12), s.Sink()).ok());
  ASSERT_TRUE(s.Wait());
  engine->Shutdown();
  EXPECT_EQ(s.rec.tokens(), FakeGreedyOutput(Range(1, 20), 12));
  EXPECT_EQ(s.rec.finals, 1);
  const StreamChunk& last = s.rec.last();
  EXPECT_EQ(last.finish, FinishReason::kLength);
  EXPECT_EQ(last.usage.prompt_tokens, 20);
  EXPECT_EQ(last.usage.generated_tokens, 12);
  EXPECT_GE(last.usage.total_time, last.usage.time_to_first_token);
  std::string expected_text;
  for (int32_t t : FakeGreedyOutput(Range(1, 20), 12)) expected_text += static_cast<char>(t);
  EXPECT_EQ(s.rec.text(), expected_text);
  EXPECT_EQ(obs.first_scheduled, 1);
  EXPECT_EQ(obs.tokens, 12);
  EXPECT_EQ(obs.first_tokens, 1);
  EXPECT_EQ(obs.finished, 1);
  EXPECT_GE(obs.steps, 12);
}

TEST_F(EngineTest, RejectsRequestsThatCanNeverRun) {
  EngineConfig config;
  config.max_model_len = 64;
  config.num_kv_blocks = 2;
  config.block_size = 16;
  auto engine = Make(config);
  auto sink = [](StreamChunk) {};
  absl::Status st = engine->Submit(MakeRequest("a", {}, 4), sink);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "prompt is empty");
  st = engine->Submit(MakeRequest("a", {1, 2, 9999}, 4), sink);
  EXPECT_EQ(st.message(), "prompt_token_ids[2] = 9999 is outside the vocabulary [0, 260)");
  st = engine->Submit(MakeRequest("a", Range(1, 40), 30), sink);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("max_tokens"), std::string::npos);
  EXPECT_NE(st.message().find("max_model_len"), std::string::npos);
  st = engine->Submit(MakeRequest("a", Range(1, 30), 10), sink);  // 3 blocks > pool of 2
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("KV pool"), std::string::npos);
  Request bad = MakeRequest("a", Range(1, 3), 4);
  bad.sampling.temperature = -1.0f;
  EXPECT_EQ(engine->Submit(bad, sink).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, ARequestWhoseKvExactlyFillsThePoolRuns) {
  // 2 blocks of 16 = 32 slots. 28 prompt tokens + 5 output tokens is 33 tokens, but the last
  // output token's KV is never written: 32 slots, so it fits, with or without pipelining.
  for (const bool async : {false, true}) {
    EngineConfig config;
    config.max_model_len = 64;
    config.num_kv_blocks = 2;
    config.block_size = 16;
    config.async_scheduling = async;
    auto engine = Make(config);
    Stream s;
    ASSERT_TRUE(engine->Submit(MakeRequest("a", Range(1, 28), 5), s.Sink()).ok()) << async;
    ASSERT_TRUE(s.Wait());
    EXPECT_EQ(s.rec.tokens(), FakeGreedyOutput(Range(1, 28), 5)) << async;
    EXPECT_EQ(s.rec.last().finish, FinishReason::kLength) << async;
    Stream t;  // one token more needs a third block
    const absl::Status st = engine->Submit(MakeRequest("b", Range(1, 28), 6), t.Sink());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << async;
    EXPECT_NE(st.message().find("needs 3 KV blocks"), std::string::npos) << st.message();
  }
}

TEST_F(EngineTest, FullQueueIsResourceExhausted) {
  EngineConfig config;
  config.max_num_seqs = 1;
  config.max_waiting = 2;
  auto engine = Make(config);
  backend_->SetStepDelay(absl::Milliseconds(20));
  std::vector<std::unique_ptr<Stream>> streams;
  absl::Status rejected;
  int accepted = 0;
  for (int i = 0; i < 10 && rejected.ok(); ++i) {
    streams.push_back(std::make_unique<Stream>());
    absl::Status st =
        engine->Submit(MakeRequest("r" + std::to_string(i), Range(1, 4), 200), streams.back()->Sink());
    if (st.ok()) ++accepted; else rejected = st;
  }
  EXPECT_EQ(rejected.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rejected.message(), "waiting queue is full (2 requests, max_waiting 2); retry later");
  EXPECT_LE(accepted, 3);
  engine->Shutdown();
  for (int i = 0; i < accepted; ++i) {
    EXPECT_EQ(streams[static_cast<size_t>(i)]->rec.finals, 1);
    EXPECT_EQ(streams[static_cast<size_t>(i)]->rec.last().finish, FinishReason::kCancelled);
  }
}

TEST_F(EngineTest, CancelEndsTheStreamAndFreesBlocks) {
  auto engine = Make();
  backend_->SetStepDelay(absl::Milliseconds(2));
  Stream s;
  ASSERT_TRUE(engine->Submit(MakeRequest("c", Range(1, 40), 1000), s.Sink()).ok());
  while (s.num_chunks() < 3) absl::SleepFor(absl::Milliseconds(1));
  engine->Cancel("c");
  ASSERT_TRUE(s.Wait());
  EXPECT_EQ(s.rec.last().finish, FinishReason::kCancelled);
  EXPECT_EQ(s.rec.finals, 1);
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (engine->GetLoad().running != 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  const LoadSnapshot load = engine->GetLoad();
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
  engine->Cancel("unknown-id");  // no-op
}

// GetLoad counts a sequence as running from the step that schedules it, before any of its tokens
// go out: a client that has its first token and asks for the load sees its request running (the
// load was published only after the step, so it lagged a step behind the tokens; ops_drain's
// "streams run on A" check read 3 of 4 running under load).
TEST_F(EngineTest, TheLoadCountsARequestRunningBeforeItsFirstTokenGoesOut) {
  EngineConfig config;
  config.async_scheduling = false;  // each step collected as it is launched, as on the CPU
  auto engine = Make(config);
  std::atomic<int32_t> running_at_first{-1}, waiting_at_first{-1};
  Stream s;
  StreamSink record = s.Sink();
  Engine* e = engine.get();
  ASSERT_TRUE(engine
                  ->Submit(MakeRequest("r", Range(1, 8), 4),
                           [&, e](StreamChunk c) {
                             if (running_at_first.load() < 0 && !c.token_ids.empty()) {
                               const LoadSnapshot load = e->GetLoad();
                               waiting_at_first = load.waiting;
                               running_at_first = load.running;
                             }
                             record(std::move(c));
                           })
                  .ok());
  ASSERT_TRUE(s.Wait());
  engine->Shutdown();
  EXPECT_EQ(running_at_first.load(), 1);
  EXPECT_EQ(waiting_at_first.load(), 0);
}

// Holds the engine thread after the first step that streamed a token (the stream's final chunk
// is out and its id released by then) until the test says go on.
struct HoldAfterFirstToken : EngineObserver {
  absl::Notification scheduled, stepped, go_on;
  void OnFirstScheduled(absl::Duration) override {
    if (!scheduled.HasBeenNotified()) scheduled.Notify();
  }
  void OnStep(const StepReport& step) override {
    if (step.generated == 0 || stepped.HasBeenNotified()) return;
    stepped.Notify();
    go_on.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
};

TEST_F(EngineTest, AStaleCancelDoesNotEndALaterRequestWithTheSameId) {
  // A cancel queued while "r" ran, "r" then finished by length, and a new "r" submitted before
  // the loop drained the queue: the cancel, meant for the first, ended the second (0 tokens).
  HoldAfterFirstToken gate;
  EngineConfig config;
  config.async_scheduling = false;  // the step is collected inside its own loop turn
  auto engine = Make(config, &gate);
  backend_->SetStepDelay(absl::Milliseconds(200));
  Stream first, second;
  ASSERT_TRUE(engine->Submit(MakeRequest("r", Range(1, 4), 1), first.Sink()).ok());
  ASSERT_TRUE(gate.scheduled.WaitForNotificationWithTimeout(absl::Seconds(10)));
  engine->Cancel("r");  // "r" is in the running step: the cancel is queued
  ASSERT_TRUE(gate.stepped.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(first.Wait());
  ASSERT_TRUE(engine->Submit(MakeRequest("r", Range(1, 4), 3), second.Sink()).ok());
  gate.go_on.Notify();
  ASSERT_TRUE(second.Wait());
  EXPECT_EQ(first.rec.last().finish, FinishReason::kLength);
  EXPECT_EQ(second.rec.last().finish, FinishReason::kLength);
  EXPECT_EQ(second.rec.tokens().size(), 3u);
}

TEST(EngineConfigTest, AZeroWaitingQueueIsRefused) {
  // Every request waits before its first step: max_waiting 0 refused them all on an idle engine.
  FakeTokenizer tok;
  EngineConfig c;
  c.max_waiting = 0;
  auto engine = Engine::Create(c, std::make_unique<FakeBackend>(), &tok);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().message(), "max_waiting = 0 must be positive");
}

TEST(EngineConfigTest, NegativeStopLimitsAreRefusedByName) {
  // A negative --max_stop_token_ids refused every request at the server's edge and none in the
  // engine (a size_t cast): refused where the engine is made.
  FakeTokenizer tok;
  for (const char* name : {"max_stop_strings", "max_stop_string_bytes", "max_stop_token_ids"}) {
    EngineConfig c;
    const std::string n = name;
    (n == "max_stop_strings" ? c.max_stop_strings
     : n == "max_stop_string_bytes" ? c.max_stop_string_bytes
                                    : c.max_stop_token_ids) = -1;
    auto engine = Engine::Create(c, std::make_unique<FakeBackend>(), &tok);
    ASSERT_FALSE(engine.ok()) << name;
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(engine.status().message().find(n + " = -1"), std::string::npos) << engine.status();
  }
}

TEST(EngineConfigTest, ADefaultPoolTooLargeToCountIsRefused) {
  // num_kv_blocks = 0 sizes the pool for max_model_len × max_num_seqs: past 2^31 - 1 blocks the
  // count was cast to 32 bits, wrapping to a small or negative pool.
  FakeTokenizer tok;
  EngineConfig c;
  c.max_model_len = 1 << 30;
  c.block_size = 16;
  c.max_num_seqs = 64;  // 2^26 blocks a sequence × 64 = 2^32
  auto engine = Engine::Create(c, std::make_unique<FakeBackend>(), &tok);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("num_kv_blocks"), std::string::npos)
      << engine.status();
}

// A step's token budget below max_num_seqs: the sequences past the budget in running order got no
// decode token, step after step, until those before them finished (and reached their deadlines
// with none). Refused by name, as vLLM refuses it; equal is the least that works.
TEST(EngineConfigTest, ABudgetBelowMaxNumSeqsIsRefused) {
  FakeTokenizer tok;
  EngineConfig c;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 32;
  auto engine = Engine::Create(c, std::make_unique<FakeBackend>(), &tok);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("max_num_batched_tokens = 32 is less than "
                                           "max_num_seqs = 64"),
            std::string::npos)
      << engine.status();
  c.max_num_batched_tokens = 64;
  EXPECT_TRUE(Engine::Create(c, std::make_unique<FakeBackend>(), &tok).ok());
}

TEST(EngineConfigTest, APoolWithMoreSlotsThanInt32CountsIsRefused) {
  // 2^27 blocks of 16 tokens: 2^31 slots, one past what int32 slot numbers hold.
  FakeTokenizer tok;
  for (const int32_t blocks : {0, 1 << 27}) {
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = blocks;
    c.max_model_len = 1 << 25;  // with 0: 2^21 blocks a sequence x 64 = 2^27
    c.max_num_seqs = 64;
    auto engine = Engine::Create(c, std::make_unique<FakeBackend>(), &tok);
    ASSERT_FALSE(engine.ok()) << blocks;
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(engine.status().message().find("2147483648 KV slots"), std::string::npos)
        << engine.status();
  }
}

TEST_F(EngineTest, DeadlineExpiresInQueueAndMidStream) {
  EngineConfig config;
  config.max_num_seqs = 1;
  auto engine = Make(config);
  backend_->SetStepDelay(absl::Milliseconds(5));
  Stream running, queued;
  Request a = MakeRequest("a", Range(1, 4), 1000);
  a.deadline = absl::Now() + absl::Milliseconds(300);
  Request b = MakeRequest("b", Range(1, 4), 10);
  b.deadline = absl::Now() + absl::Milliseconds(50);
  b.priority = -1;  // an earlier deadline would otherwise put it first
  ASSERT_TRUE(engine->Submit(a, running.Sink()).ok());
  ASSERT_TRUE(engine->Submit(b, queued.Sink()).ok());
  ASSERT_TRUE(queued.Wait());
  EXPECT_EQ(queued.rec.last().finish, FinishReason::kDeadline);
  EXPECT_EQ(queued.rec.last().usage.generated_tokens, 0);
  ASSERT_TRUE(running.Wait());
  EXPECT_EQ(running.rec.last().finish, FinishReason::kDeadline);
  EXPECT_GT(running.rec.last().usage.generated_tokens, 0);
  EXPECT_LT(running.rec.last().usage.generated_tokens, 1000);
}

// A client's cancel that reaches the engine during a long step, well before the deadline, is a
// cancel even when the step ends after the deadline (the engine carries it out then).
TEST_F(EngineTest, ACancelWaitingOutALongStepIsNoDeadline) {
  auto engine = Make();
  backend_->SetStepDelay(absl::Milliseconds(400));
  Stream s;
  Request r = MakeRequest("a", Range(1, 4), 100);
  r.deadline = absl::Now() + absl::Milliseconds(300);
  ASSERT_TRUE(engine->Submit(r, s.Sink()).ok());
  absl::SleepFor(absl::Milliseconds(50));  // the first step (400 ms) has begun
  engine->Cancel("a");
  ASSERT_TRUE(s.Wait());
  EXPECT_EQ(s.rec.last().finish, FinishReason::kCancelled);
}

TEST_F(EngineTest, BackendErrorFailsTheStepButTheEngineKeepsRunning) {
  auto engine = Make();
  backend_->FailNextSteps(1);
  Stream bad, good;
  ASSERT_TRUE(engine->Submit(MakeRequest("bad", Range(1, 4), 5), bad.Sink()).ok());
  ASSERT_TRUE(bad.Wait());
  EXPECT_EQ(bad.rec.last().finish, FinishReason::kError);
  EXPECT_FALSE(bad.rec.last().error.ok());
  ASSERT_TRUE(engine->Submit(MakeRequest("good", Range(1, 4), 5), good.Sink()).ok());
  ASSERT_TRUE(good.Wait());
  EXPECT_EQ(good.rec.tokens(), FakeGreedyOutput(Range(1, 4), 5));
}

// A sampled id outside the vocabulary fails its step, and its request ends in an error naming the
// id, instead of streaming: a negative id read as a stand-in for a token still being sampled, and
// one past the vocabulary reached the detokenizer. The engine keeps serving.
TEST_F(EngineTest, ASampledIdOutsideTheVocabularyFailsTheStep) {
  auto engine = Make();
  for (const int32_t bad_id : {-3, 100000}) {
    backend_->Script(7, {'a', bad_id, 'b'});
    Stream s;
    const std::string id = "bad" + std::to_string(bad_id);
    ASSERT_TRUE(engine->Submit(MakeRequest(id, {7, 1, 2}, 5), s.Sink()).ok());
    ASSERT_TRUE(s.Wait());
    EXPECT_EQ(s.rec.last().finish, FinishReason::kError);
    EXPECT_EQ(s.rec.last().error.code(), absl::StatusCode::kInternal);
    EXPECT_NE(s.rec.last().error.message().find("sampled token id " + std::to_string(bad_id)),
              std::string::npos)
        << s.rec.last().error;
    for (int32_t t : s.rec.tokens()) EXPECT_EQ(t, 'a');
  }
  Stream good;
  ASSERT_TRUE(engine->Submit(MakeRequest("good", Range(1, 4), 5), good.Sink()).ok());
  ASSERT_TRUE(good.Wait());
  EXPECT_EQ(good.rec.tokens(), FakeGreedyOutput(Range(1, 4), 5));
}

TEST_F(EngineTest, HealthCountsStepsFailedInARowUntilOneSucceeds) {
  // A backend that fails every step (a sticky device error): the count grows with each failed
  // request's step (the server's health watch reads it); one success resets it.
  auto engine = Make();
  backend_->FailNextSteps(1'000'000);
  for (int i = 0; i < 3; ++i) {
    Stream bad;
    ASSERT_TRUE(engine->Submit(MakeRequest("bad" + std::to_string(i), Range(1, 4), 5),
                               bad.Sink()).ok());
    ASSERT_TRUE(bad.Wait());
    EXPECT_EQ(bad.rec.last().finish, FinishReason::kError);
  }
  EXPECT_GE(engine->Health().failed_steps_in_a_row, 3);
  EXPECT_LT(engine->Health().stalled, absl::Seconds(1));  // failing, not stuck
  backend_->FailNextSteps(0);
  Stream good;
  ASSERT_TRUE(engine->Submit(MakeRequest("good", Range(1, 4), 5), good.Sink()).ok());
  ASSERT_TRUE(good.Wait());
  EXPECT_EQ(good.rec.last().finish, FinishReason::kLength);
  EXPECT_EQ(engine->Health().failed_steps_in_a_row, 0);
}

TEST_F(EngineTest, ALongStepShowsAsAStallWhileItRuns) {
  auto engine = Make();
  backend_->SetStepDelay(absl::Seconds(1));  // one step of a second: the loop is "stuck" in it
  Stream s;
  ASSERT_TRUE(engine->Submit(MakeRequest("slow", Range(1, 4), 1), s.Sink()).ok());
  // Polled: the stall grows while the step runs (live work, no pass of the loop).
  absl::Duration seen = absl::ZeroDuration();
  for (const absl::Time until = absl::Now() + absl::Seconds(5);
       seen < absl::Milliseconds(300) && absl::Now() < until;) {
    seen = std::max(seen, engine->Health().stalled);
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(seen, absl::Milliseconds(300));
  ASSERT_TRUE(s.Wait());
  // Done and published: no work, so no stall (polled: the load is published after the chunk).
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (engine->Health().stalled > absl::ZeroDuration() && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(engine->Health().stalled, absl::ZeroDuration());
}

TEST_F(EngineTest, ShutdownCancelsEveryLiveRequestOnce) {
  auto engine = Make();
  backend_->SetStepDelay(absl::Milliseconds(2));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 5; ++i) {
    streams.push_back(std::make_unique<Stream>());
    ASSERT_TRUE(engine->Submit(MakeRequest("s" + std::to_string(i), Range(1 + i, 8), 1000),
                               streams.back()->Sink()).ok());
  }
  absl::SleepFor(absl::Milliseconds(20));
  engine->Shutdown();
  for (auto& s : streams) {
    EXPECT_EQ(s->rec.finals, 1);
    EXPECT_EQ(s->rec.last().finish, FinishReason::kCancelled);
  }
  EXPECT_EQ(engine->Submit(MakeRequest("late", Range(1, 4), 4), [](StreamChunk) {}).code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(EngineTest, StopStringAndEosThroughTheEngine) {
  auto engine = Make();
  backend_->Script(7, {'o', 'k', 'S', 'T', 'O', 'P', 'z'});
  backend_->Script(8, {'h', 'i', kFakeEos, 'z'});
  Stream s1, s2;
  Request r1 = MakeRequest("s1", {7, 1, 2}, 50);
  r1.stopping.stop = {"STOP"};
  Request r2 = MakeRequest("s2", {8, 1, 2}, 50);
  r2.stopping.ignore_eos = false;
  r2.sampling.logprobs = 2;
  ASSERT_TRUE(engine->Submit(r1, s1.Sink()).ok());
  ASSERT_TRUE(engine->Submit(r2, s2.Sink()).ok());
  ASSERT_TRUE(s1.Wait());
  ASSERT_TRUE(s2.Wait());
  EXPECT_EQ(s1.rec.text(), "ok");
  EXPECT_EQ(s1.rec.last().finish, FinishReason::kStop);
  EXPECT_EQ(s1.rec.last().stop_reason, "STOP");
  EXPECT_EQ(s1.rec.last().usage.generated_tokens, 6);
  EXPECT_EQ(s2.rec.text(), "hi");
  EXPECT_EQ(s2.rec.last().finish, FinishReason::kStop);
  EXPECT_EQ(s2.rec.tokens().size(), 3u);
  for (const auto& c : s2.rec.chunks) EXPECT_EQ(c.logprobs.size(), c.token_ids.size());
}

TEST_F(EngineTest, SameSeedSameSampledStream) {
  auto engine = Make();
  Stream a, b, c;
  Request r = MakeRequest("x", Range(1, 6), 16);
  r.sampling.temperature = 0.8f;
  r.sampling.seed = 42;
  Request r2 = r;
  r2.id = "y";
  Request r3 = r;
  r3.id = "z";
  r3.sampling.seed = 43;
  ASSERT_TRUE(engine->Submit(r, a.Sink()).ok());
  ASSERT_TRUE(engine->Submit(r2, b.Sink()).ok());
  ASSERT_TRUE(engine->Submit(r3, c.Sink()).ok());
  ASSERT_TRUE(a.Wait() && b.Wait() && c.Wait());
  EXPECT_EQ(a.rec.tokens(), b.rec.tokens());
  EXPECT_NE(a.rec.tokens(), c.rec.tokens());
}

TEST_F(EngineTest, DuplicateLiveIdIsRejected) {
  Stream a;  // outlives the engine, whose shutdown still finishes "dup" through a's sink
  auto engine = Make();
  backend_->SetStepDelay(absl::Milliseconds(5));
  ASSERT_TRUE(engine->Submit(MakeRequest("dup", Range(1, 4), 100), a.Sink()).ok());
  EXPECT_EQ(engine->Submit(MakeRequest("dup", Range(1, 4), 100), [](StreamChunk) {}).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(EngineTest, AGeneratedIdSkipsACallersLiveIdOfTheSameForm) {
  // The engine names a request without an id "rtgen-<its order>"; a caller's live "rtgen-1"
  // made the second request (order 1) fail as a duplicate of an id it never sent.
  Stream a, b;  // outlive the engine, whose shutdown still finishes them through their sinks
  auto engine = Make();
  backend_->SetStepDelay(absl::Milliseconds(5));
  ASSERT_TRUE(engine->Submit(MakeRequest("rtgen-1", Range(1, 4), 100), a.Sink()).ok());
  const absl::Status generated = engine->Submit(MakeRequest("", Range(1, 4), 2), b.Sink());
  ASSERT_TRUE(generated.ok()) << generated;
  EXPECT_TRUE(b.Wait());
}

}  // namespace
}  // namespace rtgen::testing
