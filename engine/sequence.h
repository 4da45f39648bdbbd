#pragma once
// Per-request state inside the engine: the tokens so far, how many of them have KV written, the
// block table, streaming text state and timestamps. Owned by the Scheduler; touched only on the
// engine thread.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {

// The latency budget of a request with neither budget nor gRPC deadline, for ordering only: it
// sorted after every later request that had either and could wait forever under load; now it is
// passed by later ones for at most this long. A request with a deadline keeps its deadline.
inline constexpr absl::Duration kDefaultLatencyBudget = absl::Seconds(60);

// Ordered: "has reached state X" is `status >= X`.
enum class SequenceStatus { kWaiting, kRunning, kFinished };

class Sequence {
 public:
  // `order` is a unique, increasing submission number (FCFS tie-break). `seed` is the request's
  // seed or one the engine drew for it.
  Sequence(Request request, StreamSink sink, const Tokenizer* tokenizer, uint64_t seed,
           int64_t order);

  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  const Request& request() const { return request_; }
  const std::string& id() const { return request_.id; }
  uint64_t seed() const { return seed_; }
  int64_t order() const { return order_; }
  // arrival + latency_budget or the hard deadline, whichever is earlier; arrival +
  // kDefaultLatencyBudget when the request has neither (ordering only).
  absl::Time ordering_deadline() const { return ordering_deadline_; }

  // Prompt followed by the generated tokens.
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> prompt() const {
    return std::span<const int32_t>(tokens_).first(num_prompt_tokens_);
  }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens_).subspan(num_prompt_tokens_);
  }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  // Appends a sampled token; when a stand-in is pending (AppendPending), fills it in instead.
  void AppendToken(int32_t id) {
    if (has_pending_) {
      tokens_.back() = id;
      has_pending_ = false;
    } else {
      tokens_.push_back(id);
    }
  }
  // Appends PendingToken(j) for the token a launched, not yet collected step is sampling. Its
  // position counts as a token (the next decode computes its KV); its value is not known yet.
  void AppendPending(int32_t stand_in) {
    tokens_.push_back(stand_in);
    has_pending_ = true;
  }
  bool has_pending() const { return has_pending_; }
  // Output tokens whose values are known (a pending stand-in is not one).
  int32_t num_known_output_tokens() const { return num_output_tokens() - (has_pending_ ? 1 : 0); }

  // Tokens that still need their KV computed before the next sample.
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }

  SequenceStatus status = SequenceStatus::kWaiting;
  int32_t num_computed_tokens = 0;   // tokens whose KV is written (or shared from the cache)
  std::vector<int32_t> block_table;  // KV block ids, covering at least num_computed_tokens
  // Chained content hash of each full block of `tokens()` whose KV is written, in order.
  std::vector<uint64_t> block_hashes;
  // BlockManager: the registration of the cached block that stands for this sequence's last
  // committed full block (0 before its first; BlockManager::kNoChain when a block of its prefix
  // could not be registered as that prefix), the parent its next registered block records.
  uint64_t block_chain_reg = 0;
  int32_t num_preemptions = 0;
  bool was_preempted = false;        // back in the waiting queue after a preemption
  int32_t num_cached_tokens = 0;     // prefix-cache hit tokens at the first admission
  bool ever_scheduled = false;
  // Scheduled steps that hold this sequence and are not completed or failed yet; a finished
  // sequence is destroyed only when this reaches 0 (a launched step may still refer to it).
  int32_t step_refs = 0;

  IncrementalDetokenizer detokenizer;
  std::string held_text;             // decoded text held back: it may start a stop string

  absl::Time first_scheduled_time = absl::InfinitePast();
  absl::Time first_token_time = absl::InfinitePast();
  absl::Time last_token_time = absl::InfinitePast();

  FinishReason finish = FinishReason::kNone;
  StreamSink sink;

 private:
  Request request_;
  uint64_t seed_;
  int64_t order_;
  absl::Time ordering_deadline_;
  int32_t num_prompt_tokens_;
  // Reserved for the prompt, max_tokens outputs and one stand-in, so spans taken by a step
  // (SampleRequest) stay valid while later tokens are appended.
  std::vector<int32_t> tokens_;
  bool has_pending_ = false;
};

}  // namespace rtgen
