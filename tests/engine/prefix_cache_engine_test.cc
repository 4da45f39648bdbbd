// Through the engine: requests sharing a prompt prefix reuse its cached KV blocks, the hits are
// reported (Usage.cached_tokens, EngineObserver::OnPrefixCacheHit), and outputs are the same as
// with the cache off.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "engine/engine.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

struct HitCounter : EngineObserver {
  std::atomic<int32_t> hit_tokens{0};
  std::atomic<int32_t> hits{0};
  void OnPrefixCacheHit(int32_t n) override {
    hit_tokens += n;
    ++hits;
  }
};

struct Result {
  std::vector<int32_t> tokens;
  int32_t cached_tokens = -1;
  FinishReason finish = FinishReason::kNone;
};

// Runs `prompts` one after another (each waits for the previous one to finish).
std::vector<Result> RunSequentially(bool prefix_caching, const std::vector<std::vector<int32_t>>& prompts,
                                    int32_t max_tokens, HitCounter* observer) {
  FakeTokenizer tok;
  EngineConfig config;
  config.block_size = 16;
  config.enable_prefix_caching = prefix_caching;
  auto engine = Engine::Create(config, std::make_unique<FakeBackend>(), &tok, observer);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<Result> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Recorded rec;
    absl::Notification done;
    EXPECT_TRUE((*engine)
                    ->Submit(MakeRequest("r" + std::to_string(i), prompts[i], max_tokens),
                             [&](StreamChunk c) {
                               const bool last = c.finish != FinishReason::kNone;
                               rec.chunks.push_back(std::move(c));
                               if (last) done.Notify();
                             })
                    .ok());
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    results[i].tokens = rec.tokens();
    results[i].cached_tokens = rec.last().usage.cached_tokens;
    results[i].finish = rec.last().finish;
  }
  (*engine)->Shutdown();
  return results;
}

TEST(PrefixCacheEngineTest, SharedPrefixHitsAreCountedAndOutputsUnchanged) {
  constexpr int32_t kPrefix = 70;  // 4 full blocks of 16 + 6 tokens
  std::vector<int32_t> prefix;
  for (int32_t i = 0; i < kPrefix; ++i) prefix.push_back(1 + (i * 13) % 250);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t u = 0; u < 4; ++u) {
    std::vector<int32_t> p = prefix;
    for (int32_t k = 0; k < 5 + u; ++k) p.push_back(200 + u * 7 + k);
    prompts.push_back(std::move(p));
  }
  prompts.push_back(prompts[1]);  // an exact repeat: all full blocks before the last token hit

  HitCounter with_cache;
  const std::vector<Result> cached = RunSequentially(true, prompts, 12, &with_cache);
  HitCounter without_cache;
  const std::vector<Result> plain = RunSequentially(false, prompts, 12, &without_cache);

  ASSERT_EQ(cached.size(), prompts.size());
  EXPECT_EQ(cached[0].cached_tokens, 0);  // cold
  const int32_t shared_full_blocks = (kPrefix / 16) * 16;
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(cached[i].cached_tokens, shared_full_blocks) << i;
  // An exact repeat hits every full block before its last prompt token.
  const int32_t repeat_len = static_cast<int32_t>(prompts[4].size());
  EXPECT_EQ(cached[4].cached_tokens, ((repeat_len - 1) / 16) * 16);
  int32_t expected_hit_tokens = 0;
  for (const Result& r : cached) expected_hit_tokens += r.cached_tokens;
  EXPECT_EQ(with_cache.hit_tokens.load(), expected_hit_tokens);
  EXPECT_EQ(with_cache.hits.load(), 4);

  EXPECT_EQ(without_cache.hit_tokens.load(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(plain[i].cached_tokens, 0);
    EXPECT_EQ(cached[i].finish, FinishReason::kLength);
    EXPECT_EQ(cached[i].tokens, plain[i].tokens);
    EXPECT_EQ(cached[i].tokens, FakeGreedyOutput(prompts[i], 12));
  }
}

}  // namespace
}  // namespace rtgen::testing
