// Pipelined steps (async scheduling): step N+1 is scheduled and launched before step N is
// collected, its decode inputs naming N's samples as PendingToken stand-ins. Checks what the
// randomised runs cannot pin down: a sequence that step N ends is dropped from step N+1 (its
// extra row discarded, nothing streamed, freed once), a sequence whose pending token ends it by
// length is not scheduled again, the stand-in encoding and its errors, that a failed step's
// final chunk carries the text held back for a stop string (with async scheduling and without),
// and that the threaded engine streams the same tokens with async scheduling on and off.

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/engine.h"
#include "engine/pending_token.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/resolve_pending_tokens.h"
#include "tests/engine/step_driver.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

SchedulerConfig SmallConfig() {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_kv_blocks = 32;
  return c;
}

TEST(PipelinedStepsTest, StopTokenInStepNDropsTheRowAlreadyLaunchedInStepNPlus1) {
  FakeTokenizer tok;
  StepDriver d(SmallConfig(), &tok, nullptr, /*pipelined=*/true);
  d.backend.Script(9, {'a', 'b', 'z', 'c'});
  Recorded rec;
  Request r = MakeRequest("s", {9, 1, 2}, 10);
  r.stopping.stop_token_ids = {'z'};
  d.scheduler.Add(MakeSeq(&tok, std::move(r), &rec));
  while (d.scheduler.num_live() > 0) d.Step();
  // Prefill (samples a), decodes of a and b (sample b, z), and the decode of z launched before
  // z was known to stop the request: four steps, the last one's token dropped.
  EXPECT_EQ(d.backend.steps(), 4);
  EXPECT_EQ(d.scheduler.num_retired(), 1);  // the fourth step still holds it
  d.Drain();
  EXPECT_EQ(d.scheduler.num_retired(), 0);
  EXPECT_EQ(rec.finals, 1);
  EXPECT_EQ(rec.tokens(), (std::vector<int32_t>{'a', 'b', 'z'}));
  EXPECT_EQ(rec.text(), "ab");
  EXPECT_EQ(rec.last().finish, FinishReason::kStop);
  EXPECT_EQ(rec.last().usage.generated_tokens, 3);
  d.ExpectBlocksBalanced();
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST(PipelinedStepsTest, PendingTokenThatEndsByLengthIsNotDecodedAgain) {
  FakeTokenizer tok;
  StepDriver d(SmallConfig(), &tok, nullptr, /*pipelined=*/true);
  Recorded rec;
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("n", Range(1, 5), 3), &rec));
  while (d.scheduler.num_live() > 0) d.Step();
  d.Drain();
  // Prefill + two decodes make three tokens; a third decode would only be discarded.
  EXPECT_EQ(d.backend.steps(), 3);
  EXPECT_EQ(d.pending_steps(), 2);
  EXPECT_EQ(rec.tokens(), FakeGreedyOutput(Range(1, 5), 3));
  EXPECT_EQ(rec.last().finish, FinishReason::kLength);
}

// A decode whose sequence still waits for its pending token, in a full pool, waits one step
// instead of preempting: that token may end the sequence (here the stop token 'z'), and the block
// would never be used. Before, step 3 preempted B (the newest) for A's next block, A then
// stopped, and B recomputed its prompt for nothing.
TEST(PipelinedStepsTest, APendingDecodeWaitsForItsTokenRatherThanPreempting) {
  FakeTokenizer tok;
  SchedulerConfig c = SmallConfig();
  c.num_kv_blocks = 3;  // A's prompt (3 tokens) takes one block, B's (7) two
  StepDriver d(c, &tok, nullptr, /*pipelined=*/true);
  d.backend.Script(9, {'a', 'z'});
  Recorded a, b;
  Request ra = MakeRequest("a", {9, 1, 2}, 10);
  ra.stopping.stop_token_ids = {'z'};
  d.scheduler.Add(MakeSeq(&tok, std::move(ra), &a, 0));
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("b", Range(50, 7), 3), &b, 1));
  while (d.scheduler.num_live() > 0) d.Step();
  d.Drain();
  EXPECT_EQ(d.scheduler.num_preemptions(), 0);
  EXPECT_EQ(a.tokens(), (std::vector<int32_t>{'a', 'z'}));
  EXPECT_EQ(a.last().finish, FinishReason::kStop);
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(50, 7), 3));
  d.ExpectBlocksBalanced();
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST(PipelinedStepsTest, CancelWhileItsStepIsInFlightFreesItOnce) {
  FakeTokenizer tok;
  StepDriver d(SmallConfig(), &tok, nullptr, /*pipelined=*/true);
  Recorded a, b;
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("a", Range(1, 6), 20), &a, 0));
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("b", Range(30, 6), 20), &b, 1));
  for (int i = 0; i < 4; ++i) d.Step();
  ASSERT_TRUE(d.scheduler.Finish("a", FinishReason::kCancelled, absl::Now()));
  EXPECT_EQ(d.scheduler.num_retired(), 1);  // the step in flight holds "a"
  const size_t streamed = a.tokens().size();
  while (d.scheduler.num_live() > 0) d.Step();
  d.Drain();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(a.last().finish, FinishReason::kCancelled);
  EXPECT_EQ(a.tokens().size(), streamed);  // nothing after the final chunk
  EXPECT_EQ(a.last().usage.generated_tokens, static_cast<int32_t>(streamed));
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(30, 6), 20));
  EXPECT_EQ(d.scheduler.num_retired(), 0);
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST(PipelinedStepsTest, AFailedStepFailsOnlyItsOwnSequences) {
  FakeTokenizer tok;
  StepDriver d(SmallConfig(), &tok, nullptr, /*pipelined=*/true);
  d.expect_ok = false;
  Recorded a, b;
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("a", Range(1, 5), 20), &a, 0));
  for (int i = 0; i < 3; ++i) d.Step();
  d.backend.FailNextSteps(1);
  d.Step();  // a's decode: fails, which shows only when it is collected
  // b is admitted into the next step, launched before the failure is known; that step also
  // names a's sample of the failed step.
  d.scheduler.Add(MakeSeq(&tok, MakeRequest("b", Range(40, 5), 6), &b, 1));
  while (d.scheduler.num_live() > 0) d.Step();
  d.Drain();
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(a.last().finish, FinishReason::kError);
  EXPECT_EQ(b.finals, 1);
  EXPECT_EQ(b.last().finish, FinishReason::kLength);
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(40, 5), 6));
  EXPECT_EQ(d.scheduler.num_retired(), 0);
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST(PipelinedStepsTest, AFailedStepReleasesTheTextHeldForAStopString) {
  // 'b' and 'c' are streamed as ids with their text held back (a prefix of the stop string
  // "bcd"); the step after them fails. Their text comes with the error's final chunk, as it
  // would with a cancel; an incomplete UTF-8 sequence would be flushed likewise.
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "one step at a time");
    FakeTokenizer tok;
    StepDriver d(SmallConfig(), &tok, nullptr, pipelined);
    d.expect_ok = false;
    d.backend.Script(9, {'a', 'b', 'c', 'x', 'y'});
    Recorded rec;
    Request r = MakeRequest("h", {9, 1, 2}, 10);
    r.stopping.stop = {"bcd"};
    d.scheduler.Add(MakeSeq(&tok, std::move(r), &rec));
    while (rec.tokens().size() < 3) d.Step();
    EXPECT_EQ(rec.text(), "a");
    d.backend.FailNextSteps(1);
    while (d.scheduler.num_live() > 0) d.Step();
    d.Drain();
    EXPECT_EQ(rec.finals, 1);
    EXPECT_EQ(rec.last().finish, FinishReason::kError);
    // Pipelined, the step launched before the failure had already sampled 'x' (streamed with
    // the held text): the stream's text is its ids' text either way.
    const std::vector<int32_t> streamed = rec.tokens();
    EXPECT_EQ(streamed, pipelined ? (std::vector<int32_t>{'a', 'b', 'c', 'x'})
                                  : (std::vector<int32_t>{'a', 'b', 'c'}));
    EXPECT_EQ(rec.text(), std::string(streamed.begin(), streamed.end()));
    EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
  }
}

TEST(PipelinedStepsTest, StandInsEncodeSampleIndices) {
  EXPECT_EQ(PendingToken(0), -1);
  EXPECT_EQ(PendingToken(7), -8);
  EXPECT_TRUE(IsPendingToken(PendingToken(3)));
  EXPECT_FALSE(IsPendingToken(0));
  EXPECT_EQ(PendingSampleIndex(PendingToken(5)), 5);
}

TEST(PipelinedStepsTest, ResolveFillsTokenIdsAndOutputsAndNamesBadIndices) {
  const std::vector<int32_t> prompt = {4, 5}, output = {6, PendingToken(1)};
  StepInput in;
  in.token_ids = {PendingToken(1), 8};
  SampleRequest sample;
  sample.prompt = prompt;
  sample.output = output;
  in.samples = {sample};
  StepInput resolved;
  std::vector<std::vector<int32_t>> outputs;
  ASSERT_TRUE(ResolvePendingTokens(in, {11, 12}, &resolved, &outputs).ok());
  EXPECT_EQ(resolved.token_ids, (std::vector<int32_t>{12, 8}));
  EXPECT_EQ(std::vector<int32_t>(resolved.samples[0].output.begin(),
                                 resolved.samples[0].output.end()),
            (std::vector<int32_t>{6, 12}));
  EXPECT_EQ(output.back(), PendingToken(1));  // the sequence's own tokens are left alone
  const absl::Status bad = ResolvePendingTokens(in, {11}, &resolved, &outputs);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "token_ids[0] = -2 names sample 1 of the previous step, which sampled 1");
}

TEST(PipelinedStepsTest, DefaultLaunchRefusesAThirdStepAndReportsBadStandInsAtCollect) {
  FakeBackend backend;
  ASSERT_TRUE(backend.AllocateKvCache({8, 4}).ok());
  StepInput in;  // names a sample although no step ran before
  in.token_ids = {PendingToken(0)};
  ASSERT_TRUE(backend.Launch(in).ok());
  ASSERT_TRUE(backend.Launch(in).ok());
  const absl::Status third = backend.Launch(in);
  EXPECT_EQ(third.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(third.message(), "backend fake: 2 steps are already in flight");
  const absl::StatusOr<StepOutput> out = backend.Collect();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend.Collect().status().code() == absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.Collect().status().code(), absl::StatusCode::kFailedPrecondition);
}

// Streams of a fixed workload through the threaded engine (greedy and seeded sampling, a stop
// token, prefix sharing), keyed by request id.
struct EngineRunStats {
  int64_t generated = -1;           // OnStep's generated tokens, summed
  int64_t pending_steps = -1;       // launches whose input named a token of the step before
  int64_t unchained_steps = -1;     // steps with a row the backend cannot chain
  int64_t unchained_overlaps = -1;  // launches while such a step was still in flight
};

std::map<std::string, Recorded> RunEngine(bool async, EngineRunStats* stats,
                                          float repetition_penalty = 1.0f,
                                          int32_t penalty_chain_limit = 0) {
  FakeTokenizer tok;
  EngineConfig config;
  config.max_num_seqs = 6;
  config.max_num_batched_tokens = 24;
  config.max_model_len = 80;
  config.block_size = 4;
  config.num_kv_blocks = 40;
  config.async_scheduling = async;
  auto backend = std::make_unique<FakeBackend>();
  FakeBackend* fake = backend.get();
  fake->Script(200, {'q', 'r', 's', 'x', 't'});
  fake->set_penalty_chain_limit(penalty_chain_limit);
  struct GeneratedCounter : EngineObserver {
    std::atomic<int64_t> generated{0};
    void OnStep(const StepReport& step) override { generated += step.generated; }
  } observer;
  auto created = Engine::Create(config, std::move(backend), &tok, &observer);
  EXPECT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Engine> engine = std::move(created).value();
  struct Out {
    absl::Mutex mu;
    Recorded rec;
    absl::Notification done;
  };
  std::map<std::string, std::unique_ptr<Out>> outs;
  for (int i = 0; i < 12; ++i) {
    const std::string id = "e" + std::to_string(i);
    Request r = MakeRequest(id, Range(i % 3 == 0 ? 200 : 1 + 5 * i, 6 + i), 5 + 3 * i);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 100 + i;
    }
    r.stopping.stop_token_ids = {'x'};
    if (i == 4) r.sampling.repetition_penalty = repetition_penalty;
    auto out = std::make_unique<Out>();
    Out* raw = out.get();
    outs[id] = std::move(out);
    EXPECT_TRUE(engine
                    ->Submit(std::move(r),
                             [raw](StreamChunk c) {
                               const bool last = c.finish != FinishReason::kNone;
                               {
                                 absl::MutexLock lock(&raw->mu);
                                 if (last) ++raw->rec.finals;
                                 raw->rec.chunks.push_back(std::move(c));
                               }
                               if (last) raw->done.Notify();
                             })
                    .ok());
  }
  std::map<std::string, Recorded> result;
  for (auto& [id, out] : outs) {
    EXPECT_TRUE(out->done.WaitForNotificationWithTimeout(absl::Seconds(20))) << id;
    absl::MutexLock lock(&out->mu);
    result[id] = out->rec;
  }
  // The load is published after the step that sent the last chunk completes.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (engine->GetLoad().kv_blocks_free != config.num_kv_blocks && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(engine->GetLoad().kv_blocks_free, config.num_kv_blocks);
  engine->Shutdown();
  stats->generated = observer.generated;
  stats->pending_steps = fake->pending_steps();
  stats->unchained_steps = fake->unchained_steps();
  stats->unchained_overlaps = fake->unchained_overlaps();
  return result;
}

TEST(PipelinedStepsTest, EngineStreamsTheSameTokensWithAsyncSchedulingOnAndOff) {
  EngineRunStats sync_stats, async_stats;
  const std::map<std::string, Recorded> sync = RunEngine(false, &sync_stats);
  const std::map<std::string, Recorded> async = RunEngine(true, &async_stats);
  EXPECT_EQ(sync_stats.pending_steps, 0);
  EXPECT_GT(async_stats.pending_steps, 10);
  ASSERT_EQ(sync.size(), async.size());
  for (const auto& [id, rec] : sync) {
    SCOPED_TRACE(id);
    const Recorded& other = async.at(id);
    EXPECT_EQ(rec.finals, 1);
    EXPECT_EQ(other.finals, 1);
    EXPECT_EQ(rec.tokens(), other.tokens());
    EXPECT_EQ(rec.text(), other.text());
    EXPECT_EQ(rec.last().finish, other.last().finish);
    EXPECT_EQ(rec.last().usage.generated_tokens, other.last().usage.generated_tokens);
  }
  EXPECT_EQ(sync.at("e0").last().finish, FinishReason::kStop);  // the scripted 'x'
  // Steps count only streamed tokens, not the rows dropped after a stop.
  int64_t streamed = 0;
  for (const auto& [id, rec] : async) streamed += static_cast<int64_t>(rec.tokens().size());
  EXPECT_EQ(async_stats.generated, streamed);
  EXPECT_EQ(sync_stats.generated, streamed);
}

TEST(PipelinedStepsTest, StepsWithRowsTheBackendCannotChainRunOneAfterTheOther) {
  // Request e4 has a penalty, which the fake backend does not chain: every step holding it is
  // collected before the next launch; the other steps are still pipelined.
  EngineRunStats sync_stats, async_stats;
  const auto sync = RunEngine(false, &sync_stats, 1.2f);
  const auto async = RunEngine(true, &async_stats, 1.2f);
  EXPECT_EQ(sync_stats.pending_steps, 0);
  EXPECT_GT(async_stats.pending_steps, 0);
  EXPECT_GT(async_stats.unchained_steps, 5);
  EXPECT_EQ(async_stats.unchained_overlaps, 0);
  for (const auto& [id, rec] : sync) {
    SCOPED_TRACE(id);
    EXPECT_EQ(rec.tokens(), async.at(id).tokens());
    EXPECT_EQ(async.at(id).finals, 1);
  }
}

TEST(PipelinedStepsTest, APenalizedRowStopsChainingWhenItGrowsPastTheBackendsLimit) {
  // Request e4 (a prompt of 10 tokens, up to 17 new ones) chains while its prompt and output
  // hold at most 13 tokens, as the CUDA backend's device penalties do up to their limit; then
  // its steps are collected before the next launch, the first of them with a stand-in still in
  // its output. The tokens are those of steps run one after the other.
  EngineRunStats sync_stats, never_stats, limit_stats;
  const auto sync = RunEngine(false, &sync_stats, 1.2f, 13);
  RunEngine(true, &never_stats, 1.2f, 0);
  const auto async = RunEngine(true, &limit_stats, 1.2f, 13);
  EXPECT_GT(limit_stats.pending_steps, 0);
  EXPECT_GT(limit_stats.unchained_steps, 0);  // e4's later steps
  EXPECT_LT(limit_stats.unchained_steps, never_stats.unchained_steps);  // not its first ones
  EXPECT_EQ(limit_stats.unchained_overlaps, 0);
  for (const auto& [id, rec] : sync) {
    SCOPED_TRACE(id);
    EXPECT_EQ(rec.tokens(), async.at(id).tokens());
    EXPECT_EQ(async.at(id).finals, 1);
  }
}

}  // namespace
}  // namespace rtgen::testing
