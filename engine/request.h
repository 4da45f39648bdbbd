#pragma once
// A generation request as the engine receives it, and the stream chunks it sends back.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace rtgen {

// What a request produces. Only tokens today; frames (autoregressive video diffusion) will be a
// second kind with its own payload, scheduled by the same loop.
enum class WorkloadKind { kTokens };

// Ordered: a finished request has a reason other than kNone.
enum class FinishReason { kNone, kStop, kLength, kCancelled, kDeadline, kError };
const char* FinishReasonName(FinishReason reason);  // "stop", "length", ...

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // prompt tokens whose KV came from the prefix cache
  int32_t generated_tokens = 0;
  absl::Duration queue_time;      // arrival → first scheduled
  absl::Duration time_to_first_token;
  absl::Duration total_time;      // arrival → last chunk
};

// One message of the output stream. The last chunk of a request has finish != kNone.
struct StreamChunk {
  std::vector<int32_t> token_ids;
  std::string text;                      // complete UTF-8 only; stop strings removed
  std::vector<SampledToken> logprobs;    // per token, when requested
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;               // the stop string or token that matched, if any
  absl::Status error;                    // with kError
  Usage usage;                           // filled on the last chunk
};

// Called on the engine thread for each chunk; must not block (enqueue and return).
using StreamSink = std::function<void(StreamChunk)>;

struct Request {
  std::string id;                        // unique among live requests
  WorkloadKind kind = WorkloadKind::kTokens;
  std::vector<int32_t> prompt_tokens;    // already tokenized (BOS included if the model wants it)
  SamplingParams sampling;
  StoppingParams stopping;
  // Each token's log-probability in the stream, with sampling.logprobs alternatives (which
  // alone ask for them too: vLLM's logprobs = 0 is this with none).
  bool return_logprobs = false;
  // Control tokens' text (an end-of-turn token generated under ignore_eos, say; the tokens
  // Tokenizer::IsSkippedSpecial names) left out of the streamed text, as vLLM's
  // skip_special_tokens (default true); their ids are streamed either way.
  bool skip_special_tokens = true;
  int32_t priority = 0;                  // higher runs first
  std::optional<absl::Duration> latency_budget;  // for deadline-aware ordering
  absl::Time deadline = absl::InfiniteFuture();  // the request ends with kDeadline after this
  absl::Time arrival = absl::Now();
};

}  // namespace rtgen
