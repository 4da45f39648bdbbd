#include "engine/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 16, 100, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[i].load(), 1) << n << " " << grain << " " << i;
        }
      }
    }
  }
}

// Aborts the process with a message when Tick() has not been called for `stall_seconds` before
// Disarm() (a hung ParallelFor cannot be cancelled; a test that waited for it would hang the
// suite instead). Progress, not a total budget: a slow or busy machine only slows the ticks.
class Watchdog {
 public:
  Watchdog(const char* what, int stall_seconds)
      : thread_([this, what, stall_seconds] {
          const auto stall = std::chrono::seconds(stall_seconds);
          int64_t last = -1;
          auto since = std::chrono::steady_clock::now();
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
            const int64_t now_ticks = ticks_.load(std::memory_order_relaxed);
            const auto now = std::chrono::steady_clock::now();
            if (now_ticks != last) {
              last = now_ticks;
              since = now;
            } else if (now - since > stall) {
              std::fprintf(stderr, "watchdog: %s made no progress for %d s (after %lld ticks)\n",
                           what, stall_seconds, static_cast<long long>(now_ticks));
              std::abort();
            }
          }
        }) {}
  ~Watchdog() { Disarm(); }
  void Tick() { ticks_.fetch_add(1, std::memory_order_relaxed); }
  void Disarm() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<int64_t> ticks_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A decode step of the CPU backend alternates short loops of different chunk counts (attention:
// one chunk per head; the output projection right after: four per thread). Session 19 found that
// a worker finishing one loop could read the next loop's chunk count before the next loop's claim
// word was published and then claim (and run) a chunk of the next loop with the finished loop's
// word: that chunk ran twice and the loop counted one chunk too many, so ParallelFor never saw
// its count and spun forever (a GPU test comparing with the CPU backend hung about once in 10-40
// iterations on a 16-core machine). The window is a few instructions wide, so this test is a
// stress test: many more threads than cores (preemption inside the window), loops of 9 and 36
// chunks in turn, every index checked to run exactly once, and a watchdog for the hang. With the
// window widened by hand (a spin in the worker between its loads, one in ParallelFor before it
// publishes the claim word) the old pool hung within the first few thousand loops; the fixed pool
// ran them all (and 100 000 in a manual run).
TEST(ThreadPoolTest, AlternatingLoopSizesRunEveryChunkOnce) {
  ThreadPool pool(16);
  constexpr int kLoops = 40000;
  Watchdog watchdog("ParallelFor", 30);
  std::vector<std::atomic<int>> hits(576);
  for (int loop = 0; loop < kLoops; ++loop) {
    const bool heads = loop % 2 == 0;
    const int64_t n = heads ? 9 : 576, grain = heads ? 1 : 16;
    for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        for (int spin = 0; spin < 50; ++spin) {  // a little work (a compiler barrier each)
          std::atomic_signal_fence(std::memory_order_seq_cst);
        }
        hits[i].fetch_add(1, std::memory_order_relaxed);
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].load(std::memory_order_relaxed), 1)
          << "loop " << loop << " index " << i << " of " << n;
    }
    watchdog.Tick();
  }
  watchdog.Disarm();
}

// A body that throws (std::bad_alloc in a body that allocates): the exception reaches the
// caller after every chunk has run or thrown, whichever participant threw, and the next loops
// run every index exactly once. Before, the caller left with workers still running its `fn` and
// their late counts landed on the next loop's (it returned early or hung), and a worker's throw
// terminated the process.
TEST(ThreadPoolTest, AThrowingBodyReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(4);
  Watchdog watchdog("ParallelFor after a throw", 30);
  std::vector<std::atomic<int>> hits(1000);
  for (int trial = 0; trial < 300; ++trial) {
    const int thrower = trial % 4;  // the caller (0) or a worker
    std::atomic<int> chunks_run{0};
    std::atomic<bool> threw{false};
    bool caught = false;
    try {
      pool.ParallelFor(16, 1, [&](int64_t, int64_t, int participant) {
        chunks_run.fetch_add(1, std::memory_order_relaxed);
        if (participant == thrower) {
          threw.store(true);
          throw std::runtime_error("chunk failed");
        }
      });
    } catch (const std::runtime_error& e) {
      caught = true;
      EXPECT_STREQ(e.what(), "chunk failed");
    }
    // A participant that claimed no chunk threw nothing: then no exception is right too; one
    // that did must reach the caller.
    EXPECT_EQ(chunks_run.load(), 16) << "trial " << trial;  // every chunk ran before the return
    EXPECT_EQ(caught, threw.load()) << "trial " << trial;
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(hits[i].load(std::memory_order_relaxed), 1) << "trial " << trial << " index " << i;
    }
    watchdog.Tick();
  }
  // Every chunk throws: whoever ran them, one exception reaches the caller.
  EXPECT_THROW(pool.ParallelFor(16, 1,
                                [](int64_t, int64_t, int) { throw std::runtime_error("all"); }),
               std::runtime_error);
  watchdog.Disarm();
}

}  // namespace
}  // namespace rtgen
