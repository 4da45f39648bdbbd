#include "engine/engine_impl.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"
#include "engine/step_input_builder.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {
namespace {

SchedulerConfig ToSchedulerConfig(const EngineConfig& c) {
  SchedulerConfig s;
  s.max_num_seqs = c.max_num_seqs;
  s.max_num_batched_tokens = c.max_num_batched_tokens;
  s.max_model_len = c.max_model_len;
  s.block_size = c.block_size;
  s.num_kv_blocks = c.num_kv_blocks;
  s.enable_prefix_caching = c.enable_prefix_caching;
  return s;
}

absl::Status CheckPositive(const char* name, int32_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, " must be positive"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       std::unique_ptr<Backend> backend,
                                                       const Tokenizer* tokenizer,
                                                       EngineObserver* observer) {
  if (backend == nullptr) return absl::InvalidArgumentError("backend is null");
  if (tokenizer == nullptr) return absl::InvalidArgumentError("tokenizer is null");
  RETURN_IF_ERROR(CheckPositive("max_num_seqs", config.max_num_seqs));
  RETURN_IF_ERROR(CheckPositive("max_num_batched_tokens", config.max_num_batched_tokens));
  // Every running sequence's decode token must fit one step's budget: the scheduler gives the
  // budget in running order, so the sequences past it would get no token until those before them
  // finished (vLLM refuses the same).
  if (config.max_num_batched_tokens < config.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_num_batched_tokens = ", config.max_num_batched_tokens, " is less than max_num_seqs = ",
        config.max_num_seqs, ": a step could not decode every running sequence; raise "
        "max_num_batched_tokens or lower max_num_seqs"));
  }
  RETURN_IF_ERROR(CheckPositive("max_model_len", config.max_model_len));
  RETURN_IF_ERROR(CheckPositive("block_size", config.block_size));
  // 0 would refuse every request, even on an idle engine (a request waits before its first step).
  RETURN_IF_ERROR(CheckPositive("max_waiting", config.max_waiting));
  for (const auto& [name, value] : {std::pair<const char*, int32_t>{"max_stop_strings",
                                                                    config.max_stop_strings},
                                    {"max_stop_string_bytes", config.max_stop_string_bytes},
                                    {"max_stop_token_ids", config.max_stop_token_ids}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, " must not be negative"));
    }
  }
  if (config.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_blocks = ", config.num_kv_blocks, " must not be negative"));
  }
  EngineConfig resolved = config;
  if (resolved.num_kv_blocks == 0) {
    const int64_t per_seq =
        (int64_t{config.max_model_len} + config.block_size - 1) / config.block_size;
    const int64_t blocks = per_seq * config.max_num_seqs;
    if (blocks > std::numeric_limits<int32_t>::max()) {  // it was cast, wrapping to a tiny pool
      return absl::InvalidArgumentError(absl::StrCat(
          "num_kv_blocks = 0 asks for max_model_len x max_num_seqs = ", blocks,
          " blocks, more than a pool can count; set num_kv_blocks or lower either"));
    }
    resolved.num_kv_blocks = static_cast<int32_t>(blocks);
  }
  // KV slots (block × block_size + offset) are int32 in the step input and the backends: past
  // 2^31 - 1 they wrapped, one of them to -1, "store nothing".
  if (const int64_t slots = int64_t{resolved.num_kv_blocks} * config.block_size;
      slots > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_kv_blocks = ", resolved.num_kv_blocks, " x block_size = ", config.block_size, " is ",
        slots, " KV slots, more than slot numbers can count (2^31 - 1); lower num_kv_blocks",
        config.num_kv_blocks == 0 ? " (0: max_model_len x max_num_seqs) or either of those" : ""));
  }
  auto engine =
      std::make_unique<EngineImpl>(resolved, std::move(backend), tokenizer, observer);
  RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

EngineImpl::EngineImpl(const EngineConfig& config, std::unique_ptr<Backend> backend,
                       const Tokenizer* tokenizer, EngineObserver* observer)
    : config_(config),
      backend_(std::move(backend)),
      tokenizer_(tokenizer),
      observer_(observer),
      scheduler_(ToSchedulerConfig(config), tokenizer, observer) {
  kv_free_ = scheduler_.block_manager().num_free_blocks();
}

EngineImpl::~EngineImpl() { Shutdown(); }

absl::Status EngineImpl::Start() {
  KvCacheShape shape;
  shape.num_blocks = config_.num_kv_blocks;
  shape.block_size = config_.block_size;
  RETURN_IF_ERROR(backend_->AllocateKvCache(shape));
  thread_ = std::thread([this] { Loop(); });
  started_ = true;
  return absl::OkStatus();
}

absl::Status EngineImpl::Validate(const Request& request) const {
  const int32_t vocab = tokenizer_->vocab_size();
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  if (prompt_len == 0) return absl::InvalidArgumentError("prompt is empty");
  for (size_t i = 0; i < request.prompt_tokens.size(); ++i) {
    const int32_t id = request.prompt_tokens[i];
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt_token_ids[", i, "] = ", id,
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
  }
  RETURN_IF_ERROR(request.sampling.Validate(vocab));
  RETURN_IF_ERROR(request.stopping.Validate(vocab, config_.max_stop_strings,
                                            config_.max_stop_string_bytes,
                                            config_.max_stop_token_ids));
  const int64_t max_tokens = request.stopping.max_tokens;
  if (prompt_len + max_tokens > config_.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_len, " tokens) + max_tokens (", max_tokens, ") exceeds max_model_len (",
        config_.max_model_len, "); shorten the prompt or lower max_tokens"));
  }
  // The last output token's KV is never written (the sequence ends as it is sampled), so a
  // request holds at most prompt + max_tokens - 1 slots, whether admitted once or recomputed.
  const int64_t slots = prompt_len + max_tokens - 1;
  const int64_t blocks = (slots + config_.block_size - 1) / config_.block_size;
  if (blocks > config_.num_kv_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_len, " tokens) + max_tokens (", max_tokens, ") needs ", blocks,
        " KV blocks but the KV pool has ", config_.num_kv_blocks,
        "; shorten the prompt or lower max_tokens"));
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::Submit(Request request, StreamSink sink) {
  if (sink == nullptr) return absl::InvalidArgumentError("sink is null");
  RETURN_IF_ERROR(Validate(request));
  absl::MutexLock lock(&mu_);
  if (stop_) return absl::UnavailableError("engine is shut down");
  const int32_t waiting = static_cast<int32_t>(incoming_.size()) + sched_waiting_.load();
  if (waiting >= config_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("waiting queue is full (", waiting, " requests, max_waiting ",
                     config_.max_waiting, "); retry later"));
  }
  const int64_t order = next_order_++;
  if (request.id.empty()) {
    // The first "rtgen-<n>" from this order that no live request holds: a caller may have
    // chosen such an id itself.
    for (int64_t n = order;; ++n) {
      request.id = absl::StrCat("rtgen-", n);
      if (!live_ids_.contains(request.id)) break;
    }
  }
  if (live_ids_.contains(request.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id \"", request.id, "\" is already in flight"));
  }
  uint64_t seed = 0;
  if (request.sampling.seed.has_value()) {
    seed = *request.sampling.seed;
  } else {
    seed = (static_cast<uint64_t>(random_()) << 32) ^ random_();
  }
  // An idle engine's last pass may be long ago: the clock of a stall starts with this work (a
  // loop stuck in a step keeps its requests live, so it is not reset by later submissions).
  if (live_ids_.empty()) progress_ns_ = absl::GetCurrentTimeNanos();
  live_ids_.insert(request.id);
  // The wrapper forgets the id when its final chunk goes out (on the loop thread), with any
  // cancel still queued for it: that cancel was meant for this request, and left queued it
  // would end a later one submitted with the same id before the loop drained the queue.
  StreamSink wrapped = [this, id = request.id, sink = std::move(sink)](StreamChunk chunk) {
    const bool last = chunk.finish != FinishReason::kNone;
    sink(std::move(chunk));
    if (last) {
      absl::MutexLock lock(&mu_);
      live_ids_.erase(id);
      std::erase_if(cancels_, [&id](const QueuedCancel& c) { return c.id == id; });
    }
  };
  incoming_.push_back(
      std::make_unique<Sequence>(std::move(request), std::move(wrapped), tokenizer_, seed, order));
  incoming_count_ = static_cast<int32_t>(incoming_.size());
  cv_.Signal();
  return absl::OkStatus();
}

void EngineImpl::Cancel(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (stop_ || !live_ids_.contains(request_id)) return;
  cancels_.push_back({request_id, absl::Now()});
  cv_.Signal();
}

LoadSnapshot EngineImpl::GetLoad() const {
  LoadSnapshot load;
  load.waiting = incoming_count_.load() + sched_waiting_.load();
  load.running = running_.load();
  load.kv_blocks_free = kv_free_.load();
  load.kv_blocks_total = config_.num_kv_blocks;
  return load;
}

EngineHealth EngineImpl::Health() const {
  EngineHealth health;
  health.failed_steps_in_a_row = failed_in_a_row_.load();
  const LoadSnapshot load = GetLoad();
  if (load.waiting + load.running > 0) {
    const int64_t since = absl::GetCurrentTimeNanos() - progress_ns_.load();
    health.stalled = absl::Nanoseconds(std::max<int64_t>(since, 0));
  }
  return health;
}

void EngineImpl::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cv_.Signal();
  }
  if (started_ && thread_.joinable()) thread_.join();
}

void EngineImpl::Loop() {
  while (DrainIncoming()) {
    progress_ns_ = absl::GetCurrentTimeNanos();  // a pass: woken with work, not stuck in a step
    RunStep();
  }
}

bool EngineImpl::DrainIncoming() {
  std::deque<std::unique_ptr<Sequence>> submissions;
  std::vector<QueuedCancel> cancels;
  bool stop = false;
  {
    absl::MutexLock lock(&mu_);
    while (!stop_ && incoming_.empty() && cancels_.empty() && scheduler_.num_live() == 0 &&
           !in_flight_.has_value()) {
      cv_.Wait(&mu_);
    }
    submissions.swap(incoming_);
    cancels.swap(cancels_);
    stop = stop_;
    sched_waiting_ += static_cast<int32_t>(submissions.size());
    incoming_count_ = 0;
  }
  const absl::Time now = absl::Now();
  for (auto& seq : submissions) scheduler_.Add(std::move(seq));
  for (const QueuedCancel& c : cancels) scheduler_.Cancel(c.id, c.requested, now);
  if (stop) {
    CollectInFlight();  // its tokens still go out before the final chunks
    scheduler_.FinishAll(FinishReason::kCancelled, absl::Now());
    PublishLoad();
    return false;
  }
  scheduler_.ExpireDeadlines(now);
  return true;
}

void EngineImpl::RunStep() {
  // A step stays in flight here only when its sampled tokens can feed this one (see below).
  ScheduledBatch batch = scheduler_.Schedule(absl::Now());
  if (batch.empty()) {
    const bool collected = in_flight_.has_value();
    CollectInFlight();
    PublishLoad();
    if (!collected && scheduler_.num_live() > 0) {
      // Nothing fits this step (should not persist); wait briefly instead of spinning.
      absl::MutexLock lock(&mu_);
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(1));
    }
    return;
  }
  // The scheduled sequences count as running before any of their tokens go out (this step's on
  // the CPU backend, in CollectInFlight below): a client with its first token sees its request
  // in GetLoad.
  PublishLoad();
  StepInput* input = &inputs_[next_input_];
  next_input_ ^= 1;
  BuildStepInput(batch, config_.block_size, input);
  const absl::Status launched = backend_->Launch(*input);
  // The step before this one is collected after this launch: the device already runs this one
  // while the host streams that one's tokens. Its stand-ins are filled in before MarkLaunched.
  CollectInFlight();
  if (!launched.ok()) {
    ++failed_in_a_row_;
    scheduler_.FailBatch(batch, launched, absl::Now());
    PublishLoad();
    return;
  }
  scheduler_.MarkLaunched(batch);
  // Without chaining, the step must finish before the next is scheduled: its sampled tokens
  // decide what runs next.
  bool chains = config_.async_scheduling && backend_->OverlapsSteps();
  for (const SampleRequest& sample : input->samples) {
    chains = chains && backend_->ChainsSample(sample);
  }
  in_flight_ = InFlight{std::move(batch), input};
  if (!chains) CollectInFlight();
  PublishLoad();
}

void EngineImpl::CollectInFlight() {
  if (!in_flight_.has_value()) return;
  InFlight step = std::move(*in_flight_);
  in_flight_.reset();
  absl::StatusOr<StepOutput> output = backend_->Collect();
  const absl::Time now = absl::Now();
  const StepInput& input = *step.input;
  if (output.ok() && output->sampled.size() != input.samples.size()) {
    output = absl::InternalError(absl::StrCat("backend ", backend_->name(), " returned ",
                                              output->sampled.size(), " sampled tokens for ",
                                              input.samples.size(), " sampling rows"));
  }
  // An id outside the vocabulary fails the step: a negative one would read as a stand-in for a
  // token still being sampled (engine/pending_token.h), one past it would reach the detokenizer.
  const int32_t vocab = tokenizer_->vocab_size();
  for (size_t i = 0; output.ok() && i < output->sampled.size(); ++i) {
    const int32_t id = output->sampled[i].token_id;
    if (id < 0 || id >= vocab) {
      output = absl::InternalError(absl::StrCat("backend ", backend_->name(), " sampled token id ",
                                                id, " (sampling row ", i,
                                                ") outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (!output.ok()) {
    ++failed_in_a_row_;
    scheduler_.FailBatch(step.batch, output.status(), now);
    return;
  }
  failed_in_a_row_ = 0;
  const int32_t streamed = scheduler_.Complete(step.batch, output->sampled, now);
  if (observer_ != nullptr) {
    StepReport report;
    report.batch_size = static_cast<int32_t>(step.batch.seqs.size());
    report.prompt_tokens = step.batch.num_prompt_tokens;
    report.generated = streamed;
    report.prefill = step.batch.num_prefill_tokens > 0;
    report.graph_replayed = output->graph_replayed;
    report.bucket = output->graph_bucket;
    observer_->OnStep(report);
  }
}

void EngineImpl::PublishLoad() {
  sched_waiting_ = scheduler_.num_waiting();
  running_ = scheduler_.num_running();
  kv_free_ = scheduler_.block_manager().num_free_blocks();
  if (observer_ != nullptr) observer_->OnLoad(GetLoad());
}

}  // namespace rtgen
