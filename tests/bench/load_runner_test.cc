// rtgen-bench's load (client/bench/load_runner.h) without a server: the in-flight limit each mode
// takes when --concurrency is not given, the config checks, and the open loop over a fake send
// that only sleeps: requests overlap without a cap, the first goes at once, and no request
// starts past the duration however far behind the schedule falls.

#include "client/bench/load_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include "client/bench/arrival_schedule.h"
#include "gtest/gtest.h"

namespace rtgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

PromptSource Prompts() {
  WorkloadConfig workload;
  workload.input_len = 8;
  workload.output_len = 2;
  absl::StatusOr<PromptSource> source =
      PromptSource::Create(workload, TokenRangeForVocab(1000, 1, 2));
  EXPECT_TRUE(source.ok()) << source.status();
  return *std::move(source);
}

// A send that sleeps `ms` and counts the most sends running at once.
struct SleepingSend {
  int ms;
  std::atomic<int> running{0}, peak{0}, calls{0};
  RequestRecord operator()(const BenchPrompt&) {
    const int now = ++running;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    --running;
    return RequestRecord{};
  }
};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(LoadRunnerTest, OpenLoopHasNoInFlightCapUnlessGiven) {
  LoadConfig closed;
  EXPECT_EQ(InFlightLimit(closed), 1);
  closed.concurrency = 8;
  EXPECT_EQ(InFlightLimit(closed), 8);
  LoadConfig open;
  open.request_rate = 4;
  EXPECT_EQ(InFlightLimit(open), 0);  // was 1: a closed loop of one request
  open.concurrency = 3;
  EXPECT_EQ(InFlightLimit(open), 3);
}

TEST(LoadRunnerTest, ChecksTheConfig) {
  LoadConfig c;
  EXPECT_FALSE(CheckLoadConfig(c).ok());  // no stop condition
  c.num_requests = 10;
  EXPECT_TRUE(CheckLoadConfig(c).ok());
  c.concurrency = 0;
  EXPECT_FALSE(CheckLoadConfig(c).ok());  // closed loop needs one in flight
  c.concurrency = 0;
  c.request_rate = 2;
  EXPECT_TRUE(CheckLoadConfig(c).ok());  // open loop: 0 is no cap
  c.request_rate = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(CheckLoadConfig(c).ok());
  c.num_requests = 0;
  c.duration_s = 5;  // all at once, for ever: refused
  EXPECT_EQ(CheckLoadConfig(c).message(), "--request-rate inf needs --num-requests");
  c.request_rate = -1;
  EXPECT_FALSE(CheckLoadConfig(c).ok());
  // NaN and infinite durations and timeouts: refused (a NaN duration stopped no loop).
  LoadConfig d;
  d.duration_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(CheckLoadConfig(d).message(), "--duration must be a finite number >= 0");
  d.duration_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(CheckLoadConfig(d).message(), "--duration must be a finite number >= 0");
  d.duration_s = 5;
  d.request_timeout_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(CheckLoadConfig(d).message(), "--timeout must be > 0");
  d.request_timeout_s = 30;
  EXPECT_TRUE(CheckLoadConfig(d).ok());
}

TEST(LoadRunnerTest, OpenLoopRequestsOverlapWithoutACap) {
  PromptSource prompts = Prompts();
  ProgressBar bar("test", 10, 0, false);
  SleepingSend send{300};
  // 10 arrivals at 50/s (~0.2 s) of requests that take 0.3 s each: several at once.
  const LoadResult r = RunOpenLoop(50, 0, 10, 0, 1, prompts, std::ref(send), bar);
  EXPECT_EQ(r.records.size(), 10u);
  EXPECT_GT(send.peak.load(), 1);
}

TEST(LoadRunnerTest, OpenLoopSendsTheFirstRequestAtOnce) {
  // At 0.2/s the first gap of this seed is over 2 s; the first request does not wait for it.
  PoissonArrivals gaps(0.2, 7);
  ASSERT_GT(gaps.NextGapSeconds(), 2.0);
  PromptSource prompts = Prompts();
  ProgressBar bar("test", 1, 0, false);
  SleepingSend send{0};
  const Clock::time_point start = Clock::now();
  const LoadResult r = RunOpenLoop(0.2, 0, 1, 0, 7, prompts, std::ref(send), bar);
  EXPECT_EQ(r.records.size(), 1u);
  EXPECT_LT(SecondsSince(start), 1.5);
}

TEST(LoadRunnerTest, OpenLoopStartsNoRequestPastTheDuration) {
  // 1000/s for 0.5 s is ~500 arrivals, but one at a time of 0.1 s each: the schedule falls
  // behind, and the run stops starting requests at 0.5 s of wall-clock time (it took ~50 s).
  PromptSource prompts = Prompts();
  ProgressBar bar("test", 0, 0.5, false);
  SleepingSend send{100};
  const Clock::time_point start = Clock::now();
  const LoadResult r = RunOpenLoop(1000, 1, 0, 0.5, 3, prompts, std::ref(send), bar);
  EXPECT_LT(SecondsSince(start), 3.0);
  EXPECT_LE(r.records.size(), 10u);
  EXPECT_GE(r.records.size(), 1u);
}

// Lines of /proc/self/maps: each thread stack not yet joined holds two (the stack, its guard).
int MemoryMaps() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

TEST(LoadRunnerTest, OpenLoopJoinsFinishedRequestsAsItGoes) {
  // 3000 instant requests all at once: threads joined only at the end held ~6000 maps by the
  // last request (a long run reached the kernel's limit of 65530 and could not start a thread).
  PromptSource prompts = Prompts();
  ProgressBar bar("test", 3000, 0, false);
  const int before = MemoryMaps();
  std::atomic<int> sent{0}, maps_at_last{0};
  auto send = [&](const BenchPrompt&) {
    if (++sent == 3000) maps_at_last = MemoryMaps();
    return RequestRecord{};
  };
  const LoadResult r = RunOpenLoop(std::numeric_limits<double>::infinity(), 0, 3000, 0, 1,
                                   prompts, send, bar);
  EXPECT_EQ(r.records.size(), 3000u);
  EXPECT_LT(maps_at_last.load() - before, 1000);
}

// Without a cap the open loop still holds at most its thread limit at once (kMaxOpenLoopInFlight
// in rtgen-bench; each request in flight is a thread, and tens of thousands could not all be
// started). Here a limit of 64 and 200 requests that each hold their thread until all have
// started or 2 s have passed: without the limit all 200 would be in flight at once.
TEST(LoadRunnerTest, OpenLoopWithoutACapHoldsAtMostItsThreadLimit) {
  constexpr int kRequests = 200, kLimit = 64;
  PromptSource prompts = Prompts();
  ProgressBar bar("test", kRequests, 0, false);
  std::atomic<int> in_flight{0}, most{0}, started{0};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto send = [&](const BenchPrompt&) {
    const int now = ++in_flight;
    ++started;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    while (started.load() < kRequests && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    --in_flight;
    return RequestRecord{};
  };
  const LoadResult r = RunOpenLoop(std::numeric_limits<double>::infinity(), 0, kRequests, 0, 1,
                                   prompts, send, bar, kLimit);
  EXPECT_EQ(r.records.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(most.load(), kLimit);  // all at once, up to the limit
  EXPECT_EQ(kMaxOpenLoopInFlight, 4096);
}

}  // namespace
}  // namespace rtgen::bench
