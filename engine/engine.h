#pragma once
// The engine: one loop thread that schedules, runs the backend and streams results.
// Other threads only call Submit / Cancel / GetLoad; they never touch engine state directly.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/backend.h"
#include "engine/request.h"

namespace rtgen {

class Tokenizer;

struct EngineConfig {
  int32_t max_num_seqs = 64;              // sequences in one step
  int32_t max_num_batched_tokens = 512;   // tokens in one step (prefill chunks + decodes)
  int32_t max_model_len = 2048;           // context limit per sequence, tokens
  int32_t max_waiting = 1024;             // queued requests before RESOURCE_EXHAUSTED
  int32_t block_size = 16;                // tokens per KV block
  int32_t num_kv_blocks = 0;              // 0: enough for max_num_seqs full contexts
  bool enable_prefix_caching = true;
  // Pipelined steps: schedule and launch step N+1 while the backend still runs step N, feeding
  // N's sampled tokens to N+1 where they are (Backend::Launch). A sequence that N ends then
  // costs one discarded decode row in N+1. Steps run one after the other on a backend that
  // finishes a step inside Launch (CPU: Backend::OverlapsSteps) and for rows the backend cannot
  // chain (Backend::ChainsSample: on the CUDA backend, long penalty lists).
  bool async_scheduling = true;
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_stop_token_ids = 256;
};

struct LoadSnapshot {
  int32_t waiting = 0;
  int32_t running = 0;
  int32_t kv_blocks_free = 0;   // free + evictable cached blocks
  int32_t kv_blocks_total = 0;
};

// How the engine's loop is faring, for health checks (server/server.h health watch): steps that
// failed one after another (0 after any step that succeeded), and how long the loop has gone
// without finishing a pass while it had work (zero when idle or progressing).
struct EngineHealth {
  int32_t failed_steps_in_a_row = 0;
  absl::Duration stalled = absl::ZeroDuration();
};

// One completed step, as EngineObserver::OnStep sees it.
struct StepReport {
  int32_t batch_size = 0;     // sequences in the step
  int32_t prompt_tokens = 0;  // prompt tokens computed (ScheduledBatch::num_prompt_tokens)
  int32_t generated = 0;      // tokens streamed (not rows dropped for requests already finished)
  bool prefill = false;       // it ran prefill chunks (false: decode-only)
  bool graph_replayed = false;
  int32_t bucket = 0;  // the graph's bucket when replayed: sequences, or a prefill's tokens
};

// Hooks the engine calls as things happen (metrics live in server/, so the engine stays free of
// prometheus). Implementations must be cheap and non-blocking.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const StepReport& /*step*/) {}
  virtual void OnFirstScheduled(absl::Duration /*queue_time*/) {}
  virtual void OnToken(absl::Duration /*since_previous_token*/, bool /*first*/) {}
  virtual void OnFinished(FinishReason /*reason*/, const Usage& /*usage*/) {}
  virtual void OnPreemption() {}
  virtual void OnPrefixCacheHit(int32_t /*tokens*/) {}
  virtual void OnLoad(const LoadSnapshot& /*load*/) {}
};

class Engine {
 public:
  // `tokenizer` is used for streaming detokenization and stop strings; it must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        std::unique_ptr<Backend> backend,
                                                        const Tokenizer* tokenizer,
                                                        EngineObserver* observer = nullptr);
  virtual ~Engine() = default;

  // Queues a request. INVALID_ARGUMENT (naming the field) when it can never run: empty prompt,
  // prompt + max_tokens beyond max_model_len or the KV pool, bad sampling values.
  // RESOURCE_EXHAUSTED when the waiting queue is full. On OK, `sink` receives every chunk and
  // exactly one final chunk.
  virtual absl::Status Submit(Request request, StreamSink sink) = 0;
  // Ends a live request with kCancelled at the next step (no-op for unknown ids).
  virtual void Cancel(const std::string& request_id) = 0;
  virtual LoadSnapshot GetLoad() const = 0;
  // Default: healthy (test engines).
  virtual EngineHealth Health() const { return {}; }
  // Finishes every live request with kCancelled and stops the loop thread.
  virtual void Shutdown() = 0;
  virtual const EngineConfig& config() const = 0;
};

}  // namespace rtgen
