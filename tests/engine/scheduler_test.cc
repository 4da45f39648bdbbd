#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include "tests/engine/step_driver.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

SchedulerConfig Config(int32_t budget, int32_t num_blocks, int32_t block_size = 4,
                       int32_t max_seqs = 8) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 256;
  c.block_size = block_size;
  c.num_kv_blocks = num_blocks;
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Add(StepDriver& d, const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens,
           Recorded* rec, int32_t priority = 0) {
    Request r = MakeRequest(id, std::move(prompt), max_tokens);
    r.priority = priority;
    d.scheduler.Add(MakeSeq(&tok_, std::move(r), rec, order_++));
  }
  Request Req(const std::string& id, int32_t max_tokens) {
    return MakeRequest(id, Range(1, 4), max_tokens);
  }
  FakeTokenizer tok_;
  int64_t order_ = 0;
};

TEST_F(SchedulerTest, LongPromptIsChunkedUnderTheBudget) {
  StepDriver d(Config(8, 64), &tok_);
  Recorded rec;
  Add(d, "a", Range(1, 20), 2, &rec);
  auto b1 = d.scheduler.Schedule(absl::Now());
  auto items = StepDriver::Describe(b1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].tokens, 8);
  d.Run(b1);
  EXPECT_TRUE(rec.chunks.empty());  // no sample until the prompt is done
  EXPECT_EQ(StepDriver::Describe(d.Step())[0].tokens, 8);
  EXPECT_EQ(StepDriver::Describe(d.Step())[0].tokens, 4);
  ASSERT_EQ(rec.chunks.size(), 1u);
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(rec.tokens(), FakeGreedyOutput(Range(1, 20), 2));
  EXPECT_EQ(rec.last().finish, FinishReason::kLength);
  EXPECT_LE(d.backend.max_step_tokens(), 8);
}

// Prompt tokens computed (ScheduledBatch::num_prompt_tokens, the metric's count): a prompt's
// last token left alone by the chunk before runs as a decode row, the step decode-only, and
// still counts; outputs recomputed after a preemption do not.
TEST_F(SchedulerTest, PromptTokensCountTheLoneLastTokenNotRecomputedOutputs) {
  StepDriver d(Config(8, 64), &tok_);
  Recorded rec;
  Add(d, "a", Range(1, 9), 3, &rec);
  const ScheduledBatch first = d.Step();
  EXPECT_EQ(first.num_prefill_tokens, 8);
  EXPECT_EQ(first.num_prompt_tokens, 8);
  const ScheduledBatch second = d.Step();
  ASSERT_EQ(StepDriver::Describe(second).size(), 1u);
  EXPECT_FALSE(second.seqs[0].is_prefill) << "one uncomputed token: a decode row";
  EXPECT_EQ(second.num_prefill_tokens, 0);
  EXPECT_EQ(second.num_prompt_tokens, 1);
  EXPECT_EQ(d.Step().num_prompt_tokens, 0);  // the first output's decode
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(rec.tokens(), FakeGreedyOutput(Range(1, 9), 3));
}

TEST_F(SchedulerTest, DecodesAreScheduledBeforePrefillChunks) {
  StepDriver d(Config(8, 64), &tok_);
  Recorded a, b;
  Add(d, "a", Range(1, 4), 10, &a);
  d.Step();  // a prefilled, first token sampled
  Add(d, "b", Range(50, 30), 2, &b);
  for (int step = 0; step < 4; ++step) {
    auto batch = d.scheduler.Schedule(absl::Now());
    auto items = StepDriver::Describe(batch);
    ASSERT_EQ(items.size(), 2u) << "step " << step;
    EXPECT_EQ(items[0].id, "a");
    EXPECT_FALSE(items[0].prefill);
    EXPECT_EQ(items[0].tokens, 1);
    EXPECT_EQ(items[1].id, "b");
    EXPECT_TRUE(items[1].prefill);
    EXPECT_EQ(items[1].tokens, std::min(7, 30 - 7 * step));
    d.Run(batch);
  }
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(a.tokens(), FakeGreedyOutput(Range(1, 4), 10));
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(50, 30), 2));
}

TEST_F(SchedulerTest, AdmitsByPriorityThenDeadlineThenArrival) {
  StepDriver d(Config(64, 64, 4, /*max_seqs=*/1), &tok_);
  const absl::Time now = absl::Now();
  std::vector<std::string> finished;
  auto add = [&](const std::string& id, int32_t priority, absl::Duration budget) {
    Request r = MakeRequest(id, Range(1, 4), 1);
    r.priority = priority;
    r.arrival = now;
    if (budget != absl::InfiniteDuration()) r.latency_budget = budget;
    d.scheduler.Add(std::make_unique<Sequence>(
        std::move(r),
        [&finished, id](StreamChunk c) {
          if (c.finish != FinishReason::kNone) finished.push_back(id);
        },
        &tok_, 1, order_++));
  };
  add("low-first", 0, absl::InfiniteDuration());
  add("low-second", 0, absl::InfiniteDuration());
  add("low-urgent", 0, absl::Milliseconds(5));
  add("high", 5, absl::InfiniteDuration());
  add("high-urgent", 5, absl::Seconds(1));
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(finished, (std::vector<std::string>{"high-urgent", "high", "low-urgent", "low-first",
                                                "low-second"}));
}

TEST_F(SchedulerTest, ARequestWithoutBudgetOrDeadlineIsPassedForSixtySecondsAtMost) {
  // One sequence at a time. "patient" (no budget, no deadline) arrived 61 s ago; "urgent" now,
  // with a 1 s budget. Ordered as if patient's budget were kDefaultLatencyBudget (60 s), it is
  // due 1 s ago and goes first; ordered as due never, it would wait behind every urgent one.
  // A request with a gRPC deadline and no budget keeps its deadline: "late" (due in 10 minutes)
  // goes after "budgeted" (due in 2), not as if due in 60 s.
  StepDriver d(Config(64, 64, 4, /*max_seqs=*/1), &tok_);
  const absl::Time now = absl::Now();
  std::vector<std::string> finished;
  auto add = [&](const std::string& id, absl::Time arrival, std::optional<absl::Duration> budget,
                 absl::Time deadline = absl::InfiniteFuture()) {
    Request r = MakeRequest(id, Range(1, 4), 1);
    r.arrival = arrival;
    r.latency_budget = budget;
    r.deadline = deadline;
    d.scheduler.Add(std::make_unique<Sequence>(
        std::move(r),
        [&finished, id](StreamChunk c) {
          if (c.finish != FinishReason::kNone) finished.push_back(id);
        },
        &tok_, 1, order_++));
  };
  add("urgent-early", now, absl::Seconds(1));
  add("patient", now - absl::Seconds(61), std::nullopt);
  add("urgent", now, absl::Seconds(1));
  add("recent", now - absl::Seconds(30), std::nullopt);  // due in 30 s: after urgent
  add("late", now, std::nullopt, now + absl::Minutes(10));
  add("budgeted", now, absl::Minutes(2));
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(finished, (std::vector<std::string>{"patient", "urgent-early", "urgent", "recent",
                                                "budgeted", "late"}));
}

// Schedules a step on a full pool and runs it: one sequence preempted (waiting again), and the
// step holds only `decoded`'s decode.
void ScheduleOnePreemption(StepDriver& d, const std::string& decoded) {
  auto batch = d.scheduler.Schedule(absl::Now());
  EXPECT_EQ(batch.num_preempted, 1);
  auto items = StepDriver::Describe(batch);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].id, decoded);
  EXPECT_EQ(d.scheduler.num_waiting(), 1);
  d.Run(batch);
}

TEST_F(SchedulerTest, NewestRunningSequenceIsPreemptedWhenBlocksRunOut) {
  // 4 blocks of 4 tokens; two 7-token prompts fill the pool once each needs a third block.
  StepDriver d(Config(64, 4), &tok_);
  Recorded a, b;
  Add(d, "a", Range(1, 7), 6, &a);
  Add(d, "b", Range(30, 7), 6, &b);
  d.Step();  // both prefilled: 8 tokens each, 2 blocks each
  d.Step();  // both decode position 7 (still block 2): 9 tokens each
  EXPECT_EQ(d.scheduler.block_manager().num_free_blocks(), 0);
  ScheduleOnePreemption(d, "a");
  EXPECT_EQ(d.scheduler.num_preemptions(), 1);
  d.ExpectBlocksBalanced();
  int32_t recomputed_outputs = 0;  // prefill tokens that were no prompt's
  while (d.scheduler.num_live() > 0) {
    const ScheduledBatch batch = d.Step();
    recomputed_outputs += batch.num_prefill_tokens - batch.num_prompt_tokens;
    d.ExpectBlocksBalanced();
  }
  EXPECT_GT(recomputed_outputs, 0) << "b's outputs recomputed are no prompt tokens";
  // b was recomputed with the tokens it had already generated and still got the right output.
  EXPECT_EQ(a.tokens(), FakeGreedyOutput(Range(1, 7), 6));
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(30, 7), 6));
  EXPECT_EQ(a.finals, 1);
  EXPECT_EQ(b.finals, 1);
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST_F(SchedulerTest, TheLowestPriorityRunningSequenceIsPreemptedNotTheNewest) {
  // As above, but "high" (priority 5) arrives after "low" is running, so it is the newest: the
  // pool running out preempts "low", and "high" decodes on.
  StepDriver d(Config(64, 4), &tok_);
  Recorded low, high;
  Add(d, "low", Range(1, 7), 6, &low);
  d.Step();  // low prefilled
  Add(d, "high", Range(30, 7), 6, &high, /*priority=*/5);
  while (d.scheduler.block_manager().num_free_blocks() > 0) d.Step();
  ASSERT_EQ(d.scheduler.num_running(), 2);
  ScheduleOnePreemption(d, "high");
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(low.tokens(), FakeGreedyOutput(Range(1, 7), 6));
  EXPECT_EQ(high.tokens(), FakeGreedyOutput(Range(30, 7), 6));
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

TEST_F(SchedulerTest, AHigherPriorityLaterInTheRunningListPreemptsALowerOneNotItself) {
  // 3 blocks of 4 tokens. "low" (6 tokens, 2 blocks) decodes inside its second block while
  // "high" (5 tokens, 1 block), admitted after it, needs a second block for position 4: "low"
  // is preempted although it was admitted first, and "high" decodes.
  StepDriver d(Config(64, 3), &tok_);
  Recorded low, high;
  Add(d, "low", Range(1, 5), 4, &low);
  d.Step();  // low prefilled: 6 tokens
  Add(d, "high", Range(30, 4), 4, &high, /*priority=*/5);
  d.Step();  // low decodes position 5; high admitted (5 tokens, 1 block)
  ASSERT_EQ(d.scheduler.block_manager().num_free_blocks(), 0);
  ScheduleOnePreemption(d, "high");
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(low.tokens(), FakeGreedyOutput(Range(1, 5), 4));
  EXPECT_EQ(high.tokens(), FakeGreedyOutput(Range(30, 4), 4));
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

struct HitCounter : EngineObserver {
  int32_t hits = 0;
  void OnPrefixCacheHit(int32_t tokens) override { hits += tokens; }
};

TEST_F(SchedulerTest, APreemptedSequenceFindingItsOwnBlocksIsNoPrefixCacheHit) {
  // b, preempted, is admitted again and finds its own freed blocks in the cache: that is its
  // recompute, not a prompt served from the prefix cache (rtgen_prefix_cache_hit_tokens_total
  // counted it once per preemption; its usage's cached_tokens did not).
  HitCounter counter;
  StepDriver d(Config(64, 4), &tok_, &counter);
  Recorded a, b;
  Add(d, "a", Range(1, 7), 6, &a);
  Add(d, "b", Range(30, 7), 6, &b);
  d.Step();
  d.Step();
  auto batch = d.scheduler.Schedule(absl::Now());
  ASSERT_EQ(batch.num_preempted, 1);
  d.Run(batch);
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(Range(30, 7), 6));
  EXPECT_EQ(b.last().usage.cached_tokens, 0);
  EXPECT_EQ(counter.hits, 0);
}

TEST_F(SchedulerTest, UsageTimesAreNeverNegativeWhenTheClockStepsBack) {
  // Arrival and step times are wall-clock readings: a clock stepped back after arrival (an NTP
  // correction) read as negative queue, first-token and total times in the response's usage.
  StepDriver d(Config(64, 64), &tok_);
  Recorded a;
  Request r = MakeRequest("a", Range(1, 4), 2);
  const absl::Time arrival = absl::Now();
  r.arrival = arrival;
  d.scheduler.Add(MakeSeq(&tok_, std::move(r), &a, order_++));
  const absl::Time earlier = arrival - absl::Minutes(5);
  while (d.scheduler.num_live() > 0) d.Step(earlier);
  ASSERT_EQ(a.finals, 1);
  EXPECT_EQ(a.last().usage.generated_tokens, 2);
  EXPECT_EQ(a.last().usage.queue_time, absl::ZeroDuration());
  EXPECT_EQ(a.last().usage.time_to_first_token, absl::ZeroDuration());
  EXPECT_EQ(a.last().usage.total_time, absl::ZeroDuration());
}

TEST_F(SchedulerTest, SharedPrefixIsReusedAndReportedInUsage) {
  StepDriver d(Config(64, 64), &tok_);
  Recorded a, b;
  std::vector<int32_t> prefix = Range(1, 12);
  std::vector<int32_t> pa = prefix, pb = prefix;
  pa.push_back(100);
  pb.push_back(101);
  Add(d, "a", pa, 2, &a);
  d.Step();
  Add(d, "b", pb, 2, &b);
  while (d.scheduler.num_live() > 0) d.Step();
  EXPECT_EQ(b.last().usage.cached_tokens, 12);
  EXPECT_EQ(a.last().usage.cached_tokens, 0);
  EXPECT_EQ(b.tokens(), FakeGreedyOutput(pb, 2));
}

TEST_F(SchedulerTest, FinishRemovesWaitingAndRunningSequences) {
  StepDriver d(Config(64, 64, 4, 1), &tok_);
  Recorded a, b;
  Add(d, "a", Range(1, 5), 50, &a);
  Add(d, "b", Range(1, 5), 50, &b);
  d.Step();
  EXPECT_EQ(d.scheduler.num_running(), 1);
  EXPECT_TRUE(d.scheduler.Finish("b", FinishReason::kCancelled, absl::Now()));
  EXPECT_TRUE(d.scheduler.Finish("a", FinishReason::kCancelled, absl::Now()));
  EXPECT_FALSE(d.scheduler.Finish("a", FinishReason::kCancelled, absl::Now()));
  EXPECT_EQ(a.last().finish, FinishReason::kCancelled);
  EXPECT_EQ(b.last().usage.generated_tokens, 0);
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
  EXPECT_TRUE(d.Step().empty());
}

TEST_F(SchedulerTest, ACancelAtTheDeadlineCountsAsTheDeadline) {
  // gRPC cancels a call whose deadline passes, the client's timer a little before the server's.
  StepDriver d(Config(64, 64, 4, 1), &tok_);
  const absl::Time t0 = absl::Now();
  Recorded early, late, none;
  for (auto [id, rec] : {std::pair{"early", &early}, {"late", &late}, {"none", &none}}) {
    Request r = MakeRequest(id, Range(1, 5), 50);
    if (rec != &none) r.deadline = t0 + absl::Seconds(1);
    d.scheduler.Add(MakeSeq(&tok_, std::move(r), rec, order_++));
  }
  // Each asked for and carried out at once, except "early": asked for at 900 ms and carried out
  // after a step that ran past the deadline, still the client's.
  const absl::Time after = t0 + absl::Milliseconds(1500);
  EXPECT_TRUE(d.scheduler.Cancel("early", t0 + absl::Milliseconds(900), after));
  EXPECT_EQ(early.last().finish, FinishReason::kCancelled);
  const absl::Time late_at = t0 + absl::Milliseconds(970);
  EXPECT_TRUE(d.scheduler.Cancel("late", late_at, late_at));
  EXPECT_EQ(late.last().finish, FinishReason::kDeadline);
  EXPECT_TRUE(d.scheduler.Cancel("none", t0 + absl::Hours(1), t0 + absl::Hours(1)));
  EXPECT_EQ(none.last().finish, FinishReason::kCancelled);
  EXPECT_FALSE(d.scheduler.Cancel("none", t0, t0));
}

TEST_F(SchedulerTest, DeadlinesExpireInQueueAndMidStream) {
  StepDriver d(Config(64, 64, 4, 1), &tok_);
  const absl::Time t0 = absl::Now();
  Recorded a, b;
  Request ra = MakeRequest("a", Range(1, 5), 50);
  ra.deadline = t0 + absl::Seconds(10);
  Request rb = MakeRequest("b", Range(1, 5), 50);
  rb.deadline = t0 + absl::Seconds(5);
  rb.priority = -1;  // stays queued behind a
  d.scheduler.Add(MakeSeq(&tok_, std::move(ra), &a, 0));
  d.scheduler.Add(MakeSeq(&tok_, std::move(rb), &b, 1));
  for (int i = 0; i < 3; ++i) d.Step(t0 + absl::Seconds(i));
  EXPECT_EQ(d.scheduler.ExpireDeadlines(t0 + absl::Seconds(6)), 1);
  EXPECT_EQ(b.last().finish, FinishReason::kDeadline);
  EXPECT_EQ(b.last().usage.generated_tokens, 0);
  EXPECT_EQ(a.finals, 0);
  EXPECT_EQ(d.scheduler.ExpireDeadlines(t0 + absl::Seconds(11)), 1);
  EXPECT_EQ(a.last().finish, FinishReason::kDeadline);
  EXPECT_EQ(a.last().usage.generated_tokens, 3);
  EXPECT_EQ(d.scheduler.block_manager().num_used_blocks(), 0);
}

}  // namespace
}  // namespace rtgen::testing
