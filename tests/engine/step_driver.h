#pragma once
// Runs a Scheduler against the FakeBackend on the calling thread (the engine loop without its
// thread): schedule → build the step → launch → (collect the step before) → mark launched →
// collect and complete, at once or, pipelined, after the next step's launch.

#include <gtest/gtest.h>

#include <optional>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "tests/engine/fake_backend.h"

namespace rtgen::testing {

class StepDriver {
 public:
  // `pipelined`: each step is launched before the previous one is collected, as the engine
  // does with async scheduling (decode inputs carry PendingToken stand-ins).
  explicit StepDriver(const SchedulerConfig& config, const Tokenizer* tok,
                      EngineObserver* observer = nullptr, bool pipelined = false)
      : scheduler(config, tok, observer), pipelined_(pipelined) {
    KvCacheShape shape;
    shape.num_blocks = config.num_kv_blocks;
    shape.block_size = config.block_size;
    EXPECT_TRUE(backend.AllocateKvCache(shape).ok());
  }

  // One engine step; returns the batch scheduled (its Sequence pointers may be dangling).
  // Pipelined, the batch is still in flight when this returns (Drain() finishes it).
  ScheduledBatch Step(absl::Time now = absl::Now()) {
    ScheduledBatch batch = scheduler.Schedule(now);
    Run(batch, now);
    return batch;
  }

  // What a batch holds, as (id, tokens, is_prefill), read before it runs.
  struct Item {
    std::string id;
    int32_t tokens;
    bool prefill;
  };
  static std::vector<Item> Describe(const ScheduledBatch& batch) {
    std::vector<Item> items;
    for (const auto& s : batch.seqs) items.push_back({s.seq->id(), s.num_new_tokens, s.is_prefill});
    return items;
  }

  void Run(const ScheduledBatch& batch, absl::Time now = absl::Now()) {
    if (batch.empty()) {
      Drain(now);
      return;
    }
    StepInput& in = inputs_[next_input_];
    next_input_ ^= 1;
    BuildStepInput(batch, scheduler.config().block_size, &in);
    if (HasPendingTokens(in)) ++pending_steps_;
    const absl::Status launched = backend.Launch(in);
    EXPECT_TRUE(launched.ok()) << launched;
    Drain(now);  // the step before this one
    if (!launched.ok()) {
      scheduler.FailBatch(batch, launched, now);
      return;
    }
    scheduler.MarkLaunched(batch);
    in_flight_ = batch;
    if (!pipelined_) Drain(now);
  }

  // Collects and completes the step in flight, if any.
  void Drain(absl::Time now = absl::Now()) {
    if (!in_flight_.has_value()) return;
    ScheduledBatch batch = std::move(*in_flight_);
    in_flight_.reset();
    absl::StatusOr<StepOutput> out = backend.Collect();
    EXPECT_TRUE(out.ok() || !expect_ok) << out.status();
    if (!out.ok()) {
      scheduler.FailBatch(batch, out.status(), now);
      return;
    }
    scheduler.Complete(batch, out->sampled, now);
  }

  // Steps whose input named a token of the step before (only when pipelined).
  int64_t pending_steps() const { return pending_steps_; }

  void ExpectBlocksBalanced() const {
    const BlockManager& bm = scheduler.block_manager();
    EXPECT_EQ(bm.num_free_blocks() + bm.num_used_blocks(), bm.num_blocks());
  }

  FakeBackend backend;
  Scheduler scheduler;
  bool expect_ok = true;  // false: a failed step is not a test failure (injected errors)

 private:
  bool pipelined_;
  StepInput inputs_[2];
  int32_t next_input_ = 0;
  std::optional<ScheduledBatch> in_flight_;
  int64_t pending_steps_ = 0;
};

}  // namespace rtgen::testing
