#pragma once
// Runs a Scheduler against the FakeBackend on the calling thread (the engine loop without its
// thread): schedule → build the step → execute → postprocess.

#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "tests/engine/fake_backend.h"

namespace rtgen::testing {

class StepDriver {
 public:
  explicit StepDriver(const SchedulerConfig& config, const Tokenizer* tok,
                      EngineObserver* observer = nullptr)
      : scheduler(config, tok, observer) {
    KvCacheShape shape;
    shape.num_blocks = config.num_kv_blocks;
    shape.block_size = config.block_size;
    EXPECT_TRUE(backend.AllocateKvCache(shape).ok());
  }

  // One engine step; returns the batch that ran (its Sequence pointers may be dangling).
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
    if (batch.empty()) return;
    StepInput in = BuildStepInput(batch, scheduler.config().block_size);
    absl::StatusOr<StepOutput> out = backend.Execute(in);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) {
      scheduler.FailBatch(batch, out.status(), now);
      return;
    }
    scheduler.Postprocess(batch, out->sampled, now);
  }

  void ExpectBlocksBalanced() const {
    const BlockManager& bm = scheduler.block_manager();
    EXPECT_EQ(bm.num_free_blocks() + bm.num_used_blocks(), bm.num_blocks());
  }

  FakeBackend backend;
  Scheduler scheduler;
};

}  // namespace rtgen::testing
