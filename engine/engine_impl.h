#pragma once
// The Engine implementation: one loop thread owns the Scheduler (and through it every Sequence
// and the BlockManager) and the Backend. Submit / Cancel / Shutdown only touch the incoming
// queue under mu_; GetLoad reads atomics the loop publishes after each step.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace rtgen {

class EngineImpl : public Engine {
 public:
  // `config.num_kv_blocks` must already be resolved (> 0).
  EngineImpl(const EngineConfig& config, std::unique_ptr<Backend> backend,
             const Tokenizer* tokenizer, EngineObserver* observer);
  ~EngineImpl() override;

  // Allocates the backend's KV pool and starts the loop thread.
  absl::Status Start();

  absl::Status Submit(Request request, StreamSink sink) override;
  void Cancel(const std::string& request_id) override;
  LoadSnapshot GetLoad() const override;
  EngineHealth Health() const override;
  void Shutdown() override;
  const EngineConfig& config() const override { return config_; }

  // Why `request` can never run (INVALID_ARGUMENT naming the field), or OK.
  absl::Status Validate(const Request& request) const;

 private:
  // A step the backend has launched and the engine has not collected yet.
  struct InFlight {
    ScheduledBatch batch;
    StepInput* input = nullptr;  // one of inputs_, unchanged until collected
  };

  void Loop();
  // Waits for work; moves submissions and cancellations into the scheduler. False on shutdown.
  bool DrainIncoming();
  // Schedules and launches one step; collects the step before it (after the launch when both
  // may be in flight, before the schedule otherwise).
  void RunStep();
  // Collects the in-flight step (if any) and completes or fails its batch.
  void CollectInFlight();
  void PublishLoad();

  const EngineConfig config_;
  std::unique_ptr<Backend> backend_;
  const Tokenizer* tokenizer_;
  EngineObserver* observer_;
  Scheduler scheduler_;  // loop thread only
  // Loop thread only: two inputs, the in-flight step's and the next one's, reused for capacity.
  StepInput inputs_[2];
  int32_t next_input_ = 0;
  std::optional<InFlight> in_flight_;  // loop thread only

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::unique_ptr<Sequence>> incoming_ ABSL_GUARDED_BY(mu_);
  struct QueuedCancel {
    std::string id;
    absl::Time requested;  // when Cancel was called
  };
  std::vector<QueuedCancel> cancels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> live_ids_ ABSL_GUARDED_BY(mu_);  // submitted, not finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::random_device random_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  bool started_ = false;

  // Published for GetLoad. sched_waiting_ is raised under mu_ when submissions move to the
  // scheduler, so incoming + sched_waiting never undercounts the queue.
  std::atomic<int32_t> incoming_count_{0};
  std::atomic<int32_t> sched_waiting_{0};
  std::atomic<int32_t> running_{0};
  std::atomic<int32_t> kv_free_{0};
  // For Health: steps failed in a row (reset by one that succeeds), and the loop's last pass
  // (absl::GetCurrentTimeNanos) while it had work.
  std::atomic<int32_t> failed_in_a_row_{0};
  std::atomic<int64_t> progress_ns_{0};
};

}  // namespace rtgen
