#pragma once
// Continuous-batching scheduler, pure CPU state. Schedule() picks this step's work under a token
// budget and a sequence cap: running decodes first, then chunks of partially prefilled prompts
// (both by priority class, highest first), then new admissions from the waiting queue (priority
// class, then earliest deadline, then FCFS). When KV blocks run out for a decode, the
// lowest-priority running sequence not yet scheduled in this step, the most recently admitted
// of those, is preempted (blocks freed, recomputed later with its generated tokens kept).
//
// A step's life: Schedule() → the backend launches it → MarkLaunched() (its KV counts as
// written; each sampling sequence gets a PendingToken stand-in, so the next step can be
// scheduled before this one's tokens are known) → Complete() (stand-ins filled in, stops
// checked, chunks streamed, finished sequences freed) or FailBatch(). With pipelining, step N+1
// is scheduled and launched between MarkLaunched(N) and Complete(N); a sequence that Complete(N)
// finishes is then still referenced by step N+1, so it is destroyed only when every step holding
// it is completed (Sequence::step_refs).

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/sequence.h"

namespace rtgen {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 2048;
  int32_t block_size = 16;
  int32_t num_kv_blocks = 0;
  bool enable_prefix_caching = true;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // KV written this step, from seq->num_computed_tokens on
  bool is_prefill = false;     // false: a single decode token
  bool samples = false;        // its last uncomputed token is in the step: it samples a token
};

struct ScheduledBatch {
  std::vector<ScheduledSeq> seqs;  // decodes first, then prefill chunks
  int32_t num_tokens = 0;
  int32_t num_prefill_tokens = 0;  // tokens of prefill chunks (is_prefill)
  // Prompt tokens among the step's tokens: the chunks' (not outputs recomputed after a
  // preemption) and a prompt's last token where a chunk left it alone (a decode row).
  int32_t num_prompt_tokens = 0;
  int32_t num_decodes = 0;
  int32_t num_preempted = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  // `tokenizer` (required) and `observer` (optional) must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, const Tokenizer* tokenizer, EngineObserver* observer);

  // Queues a new sequence (already validated).
  void Add(std::unique_ptr<Sequence> seq);
  // Every batch returned must end in Complete() or FailBatch().
  ScheduledBatch Schedule(absl::Time now);
  // The backend accepted the step: its tokens' KV counts as written and each sampling sequence
  // gets PendingToken(j), j its index among the step's samples. Call after Complete() of the
  // step launched before it (that fills in the stand-ins this step's input carried).
  void MarkLaunched(const ScheduledBatch& batch);
  // The step ran: `sampled` has one entry per sequence of `batch` that samples, in batch order.
  // Returns the tokens streamed (rows of sequences that finished meanwhile are dropped).
  int32_t Complete(const ScheduledBatch& batch, std::span<const SampledToken> sampled,
                   absl::Time now);
  // MarkLaunched + Complete, for a step run to completion before the next is scheduled.
  void Postprocess(const ScheduledBatch& batch, std::span<const SampledToken> sampled,
                   absl::Time now) {
    MarkLaunched(batch);
    Complete(batch, sampled, now);
  }
  // The step failed: its live sequences finish with kError.
  void FailBatch(const ScheduledBatch& batch, const absl::Status& error, absl::Time now);

  // Finishes a live request (kCancelled, kDeadline, ...). False when the id is unknown.
  bool Finish(const std::string& id, FinishReason reason, absl::Time now);
  // Finishes every request whose deadline is at or before `now` with kDeadline.
  int32_t ExpireDeadlines(absl::Time now);
  // A cancel asked for at `requested` (Engine::Cancel's call), carried out at `now`: kCancelled,
  // or kDeadline when the request's deadline was at most kCancelAtDeadline away when it was
  // asked for (gRPC cancels a call whose deadline passes, and the client's timer, started earlier
  // by the request's latency, fires a little before the server's deadline); a cancel that waited
  // out a long step past the deadline is still the client's. False: unknown id.
  bool Cancel(const std::string& id, absl::Time requested, absl::Time now);
  static constexpr absl::Duration kCancelAtDeadline = absl::Milliseconds(50);
  void FinishAll(FinishReason reason, absl::Time now);

  bool Contains(const std::string& id) const { return live_.contains(id); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_live() const { return static_cast<int32_t>(live_.size()); }
  // Finished sequences kept alive for a step that still holds them.
  int32_t num_retired() const { return static_cast<int32_t>(retired_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const BlockManager& block_manager() const { return block_manager_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  struct WaitingOrder {
    bool operator()(const Sequence* a, const Sequence* b) const;
  };

  void Preempt(Sequence* victim);
  void Admit(Sequence* seq, absl::Time now);
  // Sends `chunk` (finish set) as the last chunk and forgets the sequence.
  void FinishSequence(Sequence* seq, StreamChunk chunk, absl::Time now);
  void EmitToken(Sequence* seq, const SampledToken& sampled, absl::Time now);
  // Drops one step's hold on `seq`; destroys it when it is finished and no step holds it.
  void ReleaseStepRef(Sequence* seq);

  SchedulerConfig config_;
  const Tokenizer* tokenizer_;
  EngineObserver* observer_;
  BlockManager block_manager_;
  absl::flat_hash_map<std::string, std::unique_ptr<Sequence>> live_;
  // Finished sequences a scheduled step still holds (Sequence::step_refs > 0).
  absl::flat_hash_map<Sequence*, std::unique_ptr<Sequence>> retired_;
  std::set<Sequence*, WaitingOrder> waiting_;
  // By priority class, highest first, then admission order (Admit keeps it so). A decode short
  // of blocks preempts the last one: the lowest class, the newest of it.
  std::vector<Sequence*> running_;
  int64_t num_preemptions_ = 0;
};

}  // namespace rtgen
