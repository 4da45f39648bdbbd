#include "engine/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rtgen {
namespace {

// Spin iterations before sleeping (a few tens of microseconds).
constexpr int kSpinIterations = 20000;

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
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(int index) {
  // Ranges in units of grain, split as evenly as possible.
  const int64_t units = (n_ + grain_ - 1) / grain_;
  const int64_t begin_unit = units * index / num_threads_;
  const int64_t end_unit = units * (index + 1) / num_threads_;
  const int64_t begin = std::min(n_, begin_unit * grain_);
  const int64_t end = std::min(n_, end_unit * grain_);
  if (begin < end) (*fn_)(begin, end, index);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    RunShare(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  RunShare(0);
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    CpuRelax();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
  fn_ = nullptr;
}

}  // namespace rtgen
