#pragma once
// A small persistent thread pool for data-parallel loops. The calling thread takes part in every
// loop, so a pool of N threads starts N - 1 workers. A loop is cut into chunks that participants
// claim dynamically, so a worker the OS has descheduled (a busy, shared machine) delays nothing:
// the others take its chunks. Workers spin briefly between loops (a decode step issues hundreds
// of short loops) and then sleep on an atomic wait.

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rtgen {

class ThreadPool {
 public:
  using Fn = std::function<void(int64_t begin, int64_t end, int participant)>;

  // `num_threads` <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end, participant) on disjoint ranges covering [0, n), each range a multiple
  // of `grain` long (except the last); participant is in [0, num_threads) and no two calls run
  // concurrently with the same participant. Returns when all ranges are done. If calls throw
  // (std::bad_alloc in a body that allocates), every other range still runs (a throwing one is
  // cut short), then the first exception is rethrown here; the pool stays usable.
  // Not reentrant: call from one thread at a time, and not from inside `fn`.
  void ParallelFor(int64_t n, int64_t grain, const Fn& fn);

 private:
  void WorkerLoop(int participant);
  // Claims and runs chunks of loop `generation` until none are left (or the loop changed).
  void RunChunks(uint32_t generation, int participant);

  int num_threads_ = 1;
  std::vector<std::thread> workers_;

  // The current loop. Written by ParallelFor before it publishes a new generation in claim_.
  std::atomic<const Fn*> fn_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int64_t> chunk_size_{1};
  // (generation << 32) | (chunk count << 16) | next unclaimed chunk. A claim is a CAS of the whole
  // word, so a late worker can never take a chunk of a newer loop with an older loop's state, and
  // reads the loop's other parameters only once it holds a chunk.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_chunks_{0};  // chunks of the current loop finished (or thrown)
  std::mutex error_mu_;
  std::exception_ptr error_;  // the current loop's first exception, under error_mu_
  std::atomic<uint32_t> wake_{0};        // generation, for sleeping workers
  std::atomic<bool> stop_{false};
};

}  // namespace rtgen
