// Randomised runs of the scheduler over thousands of steps with random arrivals, cancellations,
// deadlines, shared prefixes and tiny KV pools (so preemption is frequent). Checks: blocks are
// never leaked or double-freed, every request finishes exactly once with the right reason, and
// every request that ran to its length produced exactly what it would produce alone. Each shape
// also runs pipelined (step N+1 launched before step N is collected, as with async scheduling).

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/engine/step_driver.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

struct Expect {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
  bool cancelled = false;
  bool expired = false;
  Recorded rec;
};

int64_t RunRandom(uint32_t seed, int32_t block_size, int32_t num_blocks, int32_t budget,
               int32_t max_seqs, int32_t steps, bool pipelined = false) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << (pipelined ? " pipelined" : ""));
  std::mt19937 rng(seed);
  FakeTokenizer tok;
  SchedulerConfig config;
  config.max_num_seqs = max_seqs;
  config.max_num_batched_tokens = budget;
  config.max_model_len = num_blocks * block_size;
  config.block_size = block_size;
  config.num_kv_blocks = num_blocks;
  StepDriver d(config, &tok, nullptr, pipelined);
  std::map<std::string, std::unique_ptr<Expect>> all;
  // A few shared prefixes so that prefix caching is exercised.
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(Range(10 + 40 * i, block_size * (1 + i)));
  int64_t order = 0;
  absl::Time now = absl::UnixEpoch();
  const int32_t max_context = num_blocks * block_size;

  auto add_request = [&]() {
    auto e = std::make_unique<Expect>();
    std::uniform_int_distribution<int32_t> coin(0, 3);
    if (coin(rng) == 0) e->prompt = prefixes[static_cast<size_t>(rng() % prefixes.size())];
    const int32_t extra = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_context / 2));
    for (int32_t i = 0; i < extra && static_cast<int32_t>(e->prompt.size()) < max_context - 2; ++i) {
      e->prompt.push_back(1 + static_cast<int32_t>(rng() % 200));
    }
    const int32_t room = max_context - static_cast<int32_t>(e->prompt.size());
    e->max_tokens = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min(room, 24)));
    const std::string id = "r" + std::to_string(order);
    Request r = MakeRequest(id, e->prompt, e->max_tokens);
    r.priority = static_cast<int32_t>(rng() % 3);
    r.arrival = now;
    if (rng() % 4 == 0) r.latency_budget = absl::Milliseconds(rng() % 100);
    if (rng() % 10 == 0) r.deadline = now + absl::Milliseconds(10 + rng() % 500);
    d.scheduler.Add(MakeSeq(&tok, std::move(r), &e->rec, order++));
    all[id] = std::move(e);
  };

  for (int32_t step = 0; step < steps; ++step) {
    now += absl::Milliseconds(1);
    if (step < steps - 400) {
      while (rng() % 3 == 0) add_request();
      if (rng() % 20 == 0 && !all.empty()) {
        auto it = all.begin();
        std::advance(it, rng() % all.size());
        if (it->second->rec.finals == 0) {
          EXPECT_TRUE(d.scheduler.Finish(it->first, FinishReason::kCancelled, now));
          it->second->cancelled = true;
        }
      }
    }
    d.scheduler.ExpireDeadlines(now);
    d.Step(now);
    d.ExpectBlocksBalanced();
  }
  // Drain without new work.
  for (int i = 0; i < 100000 && d.scheduler.num_live() > 0; ++i) d.Step(now);
  d.Drain(now);
  EXPECT_EQ(d.scheduler.num_live(), 0);
  EXPECT_EQ(d.scheduler.num_retired(), 0);  // no finished sequence outlives its last step
  if (pipelined) {
    EXPECT_GT(d.pending_steps(), steps / 2);
  } else {
    EXPECT_EQ(d.pending_steps(), 0);
  }
  const BlockManager& bm = d.scheduler.block_manager();
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), bm.num_blocks());

  int32_t lengths = 0;
  for (auto& [id, e] : all) {
    SCOPED_TRACE(id);
    EXPECT_EQ(e->rec.finals, 1);
    if (e->rec.chunks.empty()) continue;
    const StreamChunk& last = e->rec.last();
    std::vector<int32_t> expected = FakeGreedyOutput(e->prompt, e->max_tokens);
    std::vector<int32_t> got = e->rec.tokens();
    // Whatever was streamed is a prefix of the request's stream run alone.
    EXPECT_LE(got.size(), expected.size());
    if (got.size() > expected.size()) continue;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
    if (last.finish == FinishReason::kLength) {
      EXPECT_EQ(got, expected);
      ++lengths;
    } else if (last.finish == FinishReason::kCancelled) {
      EXPECT_TRUE(e->cancelled);
    } else {
      EXPECT_EQ(last.finish, FinishReason::kDeadline);
    }
    EXPECT_EQ(last.usage.generated_tokens, static_cast<int32_t>(got.size()));
  }
  EXPECT_GT(lengths, static_cast<int32_t>(all.size()) / 2);
  // Prefix sharing really happened, so the equality above covers it.
  EXPECT_GT(bm.cached_hit_tokens(), 0);
  return d.scheduler.num_preemptions();
}

TEST(SchedulerRandomTest, TinyPoolManyPreemptions) {
  int64_t preemptions = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) preemptions += RunRandom(seed, 4, 12, 16, 6, 3000);
  EXPECT_GT(preemptions, 10);
}

TEST(SchedulerRandomTest, LargerBlocksAndBudget) {
  for (uint32_t seed = 10; seed <= 12; ++seed) RunRandom(seed, 16, 10, 64, 16, 2000);
}

TEST(SchedulerRandomTest, BudgetSmallerThanBatch) {
  RunRandom(99, 8, 20, 5, 12, 3000);
}

TEST(SchedulerRandomTest, PipelinedTinyPoolManyPreemptions) {
  int64_t preemptions = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    preemptions += RunRandom(seed, 4, 12, 16, 6, 3000, /*pipelined=*/true);
  }
  EXPECT_GT(preemptions, 10);
}

TEST(SchedulerRandomTest, PipelinedLargerBlocksAndSmallBudget) {
  for (uint32_t seed = 10; seed <= 12; ++seed) RunRandom(seed, 16, 10, 64, 16, 2000, true);
  RunRandom(99, 8, 20, 5, 12, 3000, true);
}

}  // namespace
}  // namespace rtgen::testing
