// The threaded engine under random arrivals and cancellations from another thread with a tiny KV
// pool: every request ends exactly once, outputs match the request run alone, no block leaks.

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

struct Tracked {
  absl::Mutex mu;
  Recorded rec;
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
  bool cancelled = false;
};

TEST(EngineRandomTest, RandomArrivalsAndCancelsWithTinyPool) {
  FakeTokenizer tok;
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 24;
  config.max_model_len = 96;
  config.block_size = 4;
  config.num_kv_blocks = 30;
  auto backend = std::make_unique<FakeBackend>();
  auto created = Engine::Create(config, std::move(backend), &tok);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Engine> engine = std::move(created).value();

  std::mt19937 rng(2024);
  std::map<std::string, std::unique_ptr<Tracked>> all;
  for (int i = 0; i < 300; ++i) {
    auto t = std::make_unique<Tracked>();
    const int32_t len = 1 + static_cast<int32_t>(rng() % 60);
    t->prompt = Range(1 + static_cast<int32_t>(rng() % 5) * 7, len);  // some shared prefixes
    t->max_tokens = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(96 - len));
    const std::string id = "q" + std::to_string(i);
    Tracked* raw = t.get();
    absl::Status st = engine->Submit(MakeRequest(id, t->prompt, t->max_tokens), [raw](StreamChunk c) {
      absl::MutexLock lock(&raw->mu);
      if (c.finish != FinishReason::kNone) ++raw->rec.finals;
      raw->rec.chunks.push_back(std::move(c));
    });
    ASSERT_TRUE(st.ok()) << st;
    all[id] = std::move(t);
    if (rng() % 5 == 0) {
      auto it = all.begin();
      std::advance(it, rng() % all.size());
      it->second->cancelled = true;
      engine->Cancel(it->first);
    }
    if (rng() % 3 == 0) absl::SleepFor(absl::Microseconds(rng() % 500));
  }
  // Wait for everything to finish.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (auto& [id, t] : all) {
    while (absl::Now() < give_up) {
      {
        absl::MutexLock lock(&t->mu);
        if (t->rec.finals > 0) break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  const absl::Time settle = absl::Now() + absl::Seconds(5);
  while (engine->GetLoad().running + engine->GetLoad().waiting > 0 && absl::Now() < settle) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const LoadSnapshot load = engine->GetLoad();
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
  engine->Shutdown();
  for (auto& [id, t] : all) {
    SCOPED_TRACE(id);
    absl::MutexLock lock(&t->mu);
    ASSERT_EQ(t->rec.finals, 1);
    const std::vector<int32_t> expected = FakeGreedyOutput(t->prompt, t->max_tokens);
    const std::vector<int32_t> got = t->rec.tokens();
    ASSERT_LE(got.size(), expected.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
    if (t->rec.last().finish == FinishReason::kCancelled) {
      EXPECT_TRUE(t->cancelled);
    } else {
      EXPECT_EQ(t->rec.last().finish, FinishReason::kLength);
      EXPECT_EQ(got, expected);
    }
  }
}

}  // namespace
}  // namespace rtgen::testing
