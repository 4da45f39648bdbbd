#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "engine/output_processor.h"
#include "engine/pending_token.h"

namespace rtgen {
namespace {

// A sequence whose pending token will end it for length once that token is known: another
// decode would only be discarded.
bool EndsWithPending(const Sequence& seq, int32_t max_model_len) {
  return seq.has_pending() &&
         (seq.num_output_tokens() >= seq.request().stopping.max_tokens ||
          seq.num_tokens() >= max_model_len);
}

// Of the `n` tokens from seq's first uncomputed one on, those of its prompt.
int32_t PromptTokensIn(const Sequence& seq, int32_t n) {
  return std::clamp(seq.num_prompt_tokens() - seq.num_computed_tokens, 0, n);
}

// From `start` to `end`, never negative: both are wall-clock readings (as gRPC's deadlines
// are), so a clock stepped back between them reads as no time, not as a negative duration.
absl::Duration Elapsed(absl::Time start, absl::Time end) {
  return std::max(end - start, absl::ZeroDuration());
}

}  // namespace

bool Scheduler::WaitingOrder::operator()(const Sequence* a, const Sequence* b) const {
  const int32_t pa = a->request().priority;
  const int32_t pb = b->request().priority;
  if (pa != pb) return pa > pb;  // higher priority class first
  // A preempted sequence goes back to the front of its class.
  if (a->was_preempted != b->was_preempted) return a->was_preempted;
  if (a->ordering_deadline() != b->ordering_deadline()) {
    return a->ordering_deadline() < b->ordering_deadline();
  }
  return a->order() < b->order();
}

Scheduler::Scheduler(const SchedulerConfig& config, const Tokenizer* tokenizer,
                     EngineObserver* observer)
    : config_(config),
      tokenizer_(tokenizer),
      observer_(observer),
      block_manager_(config.num_kv_blocks, config.block_size, config.enable_prefix_caching) {
  running_.reserve(static_cast<size_t>(config.max_num_seqs));
}

void Scheduler::Add(std::unique_ptr<Sequence> seq) {
  Sequence* raw = seq.get();
  raw->status = SequenceStatus::kWaiting;
  live_.emplace(raw->id(), std::move(seq));
  waiting_.insert(raw);
}

ScheduledBatch Scheduler::Schedule(absl::Time now) {
  ScheduledBatch batch;
  batch.seqs.reserve(running_.size() + 4);
  int32_t budget = config_.max_num_batched_tokens;

  // 1. Decodes (one uncomputed token), in running_'s order: higher classes first. The victim is
  // running_'s last sequence, at or after this one, so never one already scheduled in this pass
  // nor of a higher class.
  bool pool_short = false;  // a decode waits for a block: no admissions this step either
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->num_uncomputed_tokens() != 1 || EndsWithPending(*seq, config_.max_model_len)) {
      ++i;
      continue;
    }
    // Its token of the step in flight is not known yet and may end it (a stop token, EOS, a stop
    // string): then the block would never be used, and a sequence preempted for it would
    // recompute for nothing. It waits one step; by the next Schedule its token is known.
    if (seq->has_pending() && !block_manager_.CanAppend(*seq, 1)) {
      pool_short = true;
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!block_manager_.CanAppend(*seq, 1)) {
      Sequence* victim = running_.back();
      Preempt(victim);
      ++batch.num_preempted;
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) continue;  // the next sequence is now at i
    ++i;
    block_manager_.Append(*seq, 1);
    batch.seqs.push_back({seq, 1, false, true});
    ++batch.num_decodes;
    ++batch.num_tokens;
    batch.num_prompt_tokens += PromptTokensIn(*seq, 1);
    --budget;
  }

  // 2. Chunks of prompts already admitted (their blocks were allocated at admission).
  for (Sequence* seq : running_) {
    if (budget <= 0) break;
    const int32_t remaining = seq->num_uncomputed_tokens();
    if (remaining <= 1) continue;
    const int32_t n = std::min(remaining, budget);
    batch.seqs.push_back({seq, n, true, n == remaining});
    batch.num_tokens += n;
    batch.num_prefill_tokens += n;
    batch.num_prompt_tokens += PromptTokensIn(*seq, n);
    budget -= n;
  }

  // 3. Admissions, unless this step had to preempt or leave a decode waiting (the pool is tight).
  while (batch.num_preempted == 0 && !pool_short && budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = *waiting_.begin();
    if (!block_manager_.CanAllocate(*seq)) break;  // head of line: keeps the queue's order
    waiting_.erase(waiting_.begin());
    Admit(seq, now);
    const int32_t n = std::min(seq->num_uncomputed_tokens(), budget);
    batch.seqs.push_back({seq, n, true, n == seq->num_uncomputed_tokens()});
    batch.num_tokens += n;
    batch.num_prefill_tokens += n;
    batch.num_prompt_tokens += PromptTokensIn(*seq, n);
    budget -= n;
  }
  for (const ScheduledSeq& s : batch.seqs) ++s.seq->step_refs;
  return batch;
}

void Scheduler::Admit(Sequence* seq, absl::Time now) {
  const int32_t cached = block_manager_.Allocate(*seq);
  seq->status = SequenceStatus::kRunning;
  seq->was_preempted = false;
  // After every sequence of its class or higher: running_ stays ordered by class, then admission.
  const auto higher = [](const Sequence* a, const Sequence* b) {
    return a->request().priority > b->request().priority;
  };
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, higher), seq);
  if (!seq->ever_scheduled) {
    seq->ever_scheduled = true;
    seq->first_scheduled_time = now;
    seq->num_cached_tokens = cached;
    if (observer_ != nullptr) observer_->OnFirstScheduled(now - seq->request().arrival);
    // Hits at the first admission only, as in its usage: a preempted sequence admitted again
    // finds its own freed blocks, which is its recompute, not a prompt served from the cache.
    if (cached > 0 && observer_ != nullptr) observer_->OnPrefixCacheHit(cached);
  }
}

void Scheduler::Preempt(Sequence* victim) {
  auto it = std::find(running_.begin(), running_.end(), victim);
  assert(it != running_.end());
  running_.erase(it);
  block_manager_.Free(*victim);
  victim->status = SequenceStatus::kWaiting;
  victim->was_preempted = true;
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.insert(victim);
  if (observer_ != nullptr) observer_->OnPreemption();
}

void Scheduler::MarkLaunched(const ScheduledBatch& batch) {
  int32_t sample_index = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    const int32_t j = s.samples ? sample_index++ : -1;
    Sequence* seq = s.seq;
    if (seq->status == SequenceStatus::kFinished) continue;  // cancelled since it was scheduled
    assert(seq->status == SequenceStatus::kRunning);
    seq->num_computed_tokens += s.num_new_tokens;
    if (s.samples) seq->AppendPending(PendingToken(j));
  }
}

int32_t Scheduler::Complete(const ScheduledBatch& batch, std::span<const SampledToken> sampled,
                            absl::Time now) {
  size_t k = 0;
  int32_t streamed = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    Sequence* seq = s.seq;
    assert(!s.samples || k < sampled.size());
    const SampledToken* token = s.samples ? &sampled[k++] : nullptr;
    const bool finished = seq->status == SequenceStatus::kFinished;
    ReleaseStepRef(seq);      // destroys a finished sequence no other step holds
    if (finished) continue;  // its output is dropped
    // A sequence preempted since (back to waiting) keeps no blocks: it recomputes later.
    if (seq->status == SequenceStatus::kRunning) block_manager_.CommitComputedBlocks(*seq);
    if (token == nullptr) continue;
    EmitToken(seq, *token, now);
    ++streamed;
  }
  return streamed;
}

void Scheduler::ReleaseStepRef(Sequence* seq) {
  assert(seq->step_refs > 0);
  if (--seq->step_refs > 0 || seq->status != SequenceStatus::kFinished) return;
  retired_.erase(seq);  // destroys `seq`
}

void Scheduler::EmitToken(Sequence* seq, const SampledToken& sampled, absl::Time now) {
  const bool first = seq->num_known_output_tokens() == 0;
  StreamChunk chunk;
  chunk.token_ids.assign(1, sampled.token_id);
  chunk.finish = AppendSampledToken(*seq, sampled.token_id, *tokenizer_, config_.max_model_len,
                                    &chunk.text, &chunk.stop_reason);
  if (observer_ != nullptr) {
    observer_->OnToken(first ? now - seq->request().arrival : now - seq->last_token_time, first);
  }
  if (first) seq->first_token_time = now;
  seq->last_token_time = now;
  if (seq->request().return_logprobs || seq->request().sampling.logprobs > 0) {
    chunk.logprobs.push_back(sampled);
  }
  if (chunk.finish == FinishReason::kNone) {
    seq->sink(std::move(chunk));
    return;
  }
  FinishSequence(seq, std::move(chunk), now);
}

void Scheduler::FinishSequence(Sequence* seq, StreamChunk chunk, absl::Time now) {
  if (seq->status == SequenceStatus::kRunning) {
    auto it = std::find(running_.begin(), running_.end(), seq);
    assert(it != running_.end());
    running_.erase(it);
  } else if (seq->status == SequenceStatus::kWaiting) {
    waiting_.erase(seq);
  }
  block_manager_.Free(*seq);
  seq->status = SequenceStatus::kFinished;
  seq->finish = chunk.finish;

  const absl::Time arrival = seq->request().arrival;
  Usage& usage = chunk.usage;
  usage.prompt_tokens = seq->num_prompt_tokens();
  usage.cached_tokens = seq->num_cached_tokens;
  usage.generated_tokens = seq->num_known_output_tokens();  // a pending token was never sent
  usage.queue_time = Elapsed(arrival, seq->ever_scheduled ? seq->first_scheduled_time : now);
  usage.time_to_first_token =
      usage.generated_tokens > 0 ? Elapsed(arrival, seq->first_token_time) : absl::ZeroDuration();
  usage.total_time = Elapsed(arrival, now);
  if (observer_ != nullptr) observer_->OnFinished(chunk.finish, usage);
  seq->sink(std::move(chunk));
  auto it = live_.find(seq->id());
  assert(it != live_.end());
  if (seq->step_refs > 0) {
    retired_.emplace(seq, std::move(it->second));  // a launched step still refers to it
  }
  live_.erase(it);  // destroys `seq` unless retired
}

bool Scheduler::Finish(const std::string& id, FinishReason reason, absl::Time now) {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  Sequence* seq = it->second.get();
  StreamChunk chunk;
  chunk.finish = reason;
  // Every finish, an error's too, releases the text held back for a possible stop string: its
  // token ids have been streamed, so their text is the caller's (output_processor.h).
  chunk.text = ReleaseHeldText(*seq);
  FinishSequence(seq, std::move(chunk), now);
  return true;
}

bool Scheduler::Cancel(const std::string& id, absl::Time requested, absl::Time now) {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  const bool at_deadline = it->second->request().deadline - kCancelAtDeadline <= requested;
  return Finish(id, at_deadline ? FinishReason::kDeadline : FinishReason::kCancelled, now);
}

int32_t Scheduler::ExpireDeadlines(absl::Time now) {
  std::vector<std::string> expired;
  for (const auto& [id, seq] : live_) {
    if (seq->request().deadline <= now) expired.push_back(id);
  }
  for (const std::string& id : expired) Finish(id, FinishReason::kDeadline, now);
  return static_cast<int32_t>(expired.size());
}

void Scheduler::FinishAll(FinishReason reason, absl::Time now) {
  std::vector<std::string> ids;
  ids.reserve(live_.size());
  for (const auto& [id, seq] : live_) ids.push_back(id);
  for (const std::string& id : ids) Finish(id, reason, now);
}

void Scheduler::FailBatch(const ScheduledBatch& batch, const absl::Status& error,
                          absl::Time now) {
  for (const ScheduledSeq& s : batch.seqs) {
    Sequence* seq = s.seq;
    const bool finished = seq->status == SequenceStatus::kFinished;
    ReleaseStepRef(seq);
    if (finished) continue;
    StreamChunk chunk;
    chunk.finish = FinishReason::kError;
    chunk.error = error;
    chunk.text = ReleaseHeldText(*seq);  // as Finish: the streamed ids' held-back text
    FinishSequence(seq, std::move(chunk), now);
  }
}

}  // namespace rtgen
