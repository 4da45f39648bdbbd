#include "engine/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rtgen {
namespace {

// Pause iterations a worker spins waiting for the next loop before it sleeps (~50 us).
constexpr int kWorkerSpin = 2000;
// Pause iterations the caller spins on a straggler's chunk before yielding its core.
constexpr int kCallerSpin = 500;
// Chunks per participant: enough to balance, few enough that claiming stays cheap.
constexpr int64_t kChunksPerThread = 4;

// claim_ = generation << 32 | chunk count << 16 | next unclaimed chunk.
constexpr int64_t kMaxChunks = 0xFFFF;
constexpr uint64_t ClaimWord(uint32_t generation, int64_t num_chunks) {
  return uint64_t{generation} << 32 | static_cast<uint64_t>(num_chunks) << 16;
}

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads_ = std::max(1, num_threads);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint32_t generation, int participant) {
  uint64_t state = claim_.load(std::memory_order_acquire);
  while (true) {
    if (static_cast<uint32_t>(state >> 32) != generation) return;
    // The chunk count comes from the same word as the chunk: a count read from its own variable
    // could already be the next loop's (the caller publishes a loop's parameters before its
    // claim word), and a claim of the finished loop's word would then run a chunk of the next
    // loop twice and count one chunk too many, so the caller never saw its count and waited
    // forever.
    const int64_t chunk = static_cast<int64_t>(state & 0xFFFFu);
    if (chunk >= static_cast<int64_t>((state >> 16) & 0xFFFFu)) return;
    if (!claim_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `state` now holds the current value
    }
    // Claimed: chunk `chunk` of this generation was unclaimed, so the loop is not finished and
    // its parameters (published before claim_, release) are still the current ones.
    const Fn* fn = fn_.load(std::memory_order_relaxed);
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int64_t size = chunk_size_.load(std::memory_order_relaxed);
    const int64_t begin = chunk * size;
    // A chunk that throws still counts as done: the caller waits for every chunk before it
    // rethrows, so no worker runs `fn` (the caller's) after ParallelFor has left, and no late
    // count lands on the next loop's.
    try {
      (*fn)(begin, std::min(n, begin + size), participant);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    done_chunks_.fetch_add(1, std::memory_order_acq_rel);
    state = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop(int participant) {
  uint32_t seen = 0;
  while (true) {
    uint32_t gen = wake_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kWorkerSpin; ++spin) {
      CpuRelax();
      gen = wake_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      wake_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    RunChunks(gen, participant);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  if (num_threads_ == 1 || units == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t chunks_wanted =
      std::min({units, num_threads_ * kChunksPerThread, kMaxChunks});
  const int64_t chunk_size = (units + chunks_wanted - 1) / chunks_wanted * grain;
  const int64_t num_chunks = (n + chunk_size - 1) / chunk_size;

  const uint32_t generation = wake_.load(std::memory_order_relaxed) + 1;
  fn_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  chunk_size_.store(chunk_size, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  claim_.store(ClaimWord(generation, num_chunks), std::memory_order_release);
  wake_.store(generation, std::memory_order_release);
  wake_.notify_all();

  RunChunks(generation, 0);
  for (int spin = 0; done_chunks_.load(std::memory_order_acquire) != num_chunks; ++spin) {
    if (spin < kCallerSpin) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace rtgen
