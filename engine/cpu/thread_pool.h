#pragma once
// A small persistent thread pool for data-parallel loops. The calling thread takes part in every
// loop, so a pool of N threads starts N - 1 workers. Workers spin briefly between loops (a decode
// step issues hundreds of short loops) and then sleep on an atomic wait.

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace rtgen {

class ThreadPool {
 public:
  // `num_threads` <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n), one contiguous range
  // per thread, each range a multiple of `grain` (except the last). Returns when all are done.
  // Not reentrant: call from one thread at a time, and not from inside `fn`.
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop(int index);
  void RunShare(int index);

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  // The current loop; written before generation_ is bumped, read by workers after they see it.
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current loop
  std::atomic<bool> stop_{false};
};

}  // namespace rtgen
