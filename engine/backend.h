#pragma once
// The interface every compute backend (CPU reference, CUDA) implements. The engine hands it one
// step as plain data; the backend owns all weights, KV memory and device pointers.
//
// A step is a flat list of tokens from several sequences (prefill chunks and single decode
// tokens), described CSR-style: sequence s owns tokens [query_start[s], query_start[s+1]).
// KV for token t is written to slot slot_mapping[t] = block * block_size + offset, the slot of
// its position through its sequence's block table (the CUDA backend also takes -1: skip, for
// padded rows). Attention for sequence s reads its first context_lens[s] positions through its
// block table row, causally (a token at position p sees positions <= p).
//
// Steps can be pipelined: the engine may Launch step N+1 before it Collects step N, so the host
// schedules and prepares the next step while the device runs this one. A decode token that step N
// is still sampling then goes into step N+1 as PendingToken(j): "the token samples[j] of the step
// launched just before this one drew" (engine/pending_token.h). The backend fills it in where the
// value lives (on the device for CUDA).

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/pending_token.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace rtgen {

// What one sequence in the step needs sampled (only sequences whose last prompt token or decode
// token is in this step sample).
struct SampleRequest {
  int32_t seq_index = 0;             // index into the step's sequences
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt;   // for penalties
  // Tokens generated so far; output.size() is the RNG counter. Its last entry may be a
  // PendingToken (the sample this step's input token comes from), filled in by the engine once
  // the earlier step is collected: Launch may read every value but that one (the CUDA backend's
  // device penalties), Collect every value.
  std::span<const int32_t> output;
  uint64_t seed = 0;
};

struct StepInput {
  std::vector<int32_t> token_ids;      // [num_tokens] vocabulary ids, or PendingToken(j)
  std::vector<int32_t> positions;      // [num_tokens] absolute position of each token
  std::vector<int32_t> slot_mapping;   // [num_tokens] KV slot, or -1
  std::vector<int32_t> query_start;    // [num_seqs + 1]
  std::vector<int32_t> context_lens;   // [num_seqs] positions with KV after this step
  std::vector<int32_t> block_tables;   // [num_seqs * max_blocks_per_seq], -1 padded
  int32_t max_blocks_per_seq = 0;
  bool is_decode_only = false;         // every sequence has exactly one token
  std::vector<SampleRequest> samples;
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
};

struct StepOutput {
  std::vector<SampledToken> sampled;   // one per StepInput::samples, same order
  bool graph_replayed = false;         // CUDA: the step ran as a captured graph
  int32_t graph_bucket = 0;            // CUDA: the bucket replayed
  int32_t context_bound = 0;           // CUDA decode: the context class it was planned for
};

struct KvCacheShape {
  int32_t num_blocks = 0;
  int32_t block_size = 16;             // tokens per block
};

inline bool HasPendingTokens(const StepInput& in) {
  for (int32_t id : in.token_ids) {
    if (IsPendingToken(id)) return true;
  }
  return false;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Allocates the KV pool (all layers). Called once before the first Execute.
  virtual absl::Status AllocateKvCache(const KvCacheShape& shape) = 0;
  // Blocks the KV pool could hold within `memory_bytes` (for sizing from free memory).
  virtual int64_t KvBytesPerBlock(int32_t block_size) const = 0;
  // Runs the forward pass for the step and samples the requested rows, to completion. No step
  // may be in flight (Launch without its Collect) and the input has no PendingToken.
  virtual absl::StatusOr<StepOutput> Execute(const StepInput& input) = 0;
  // Forward only: logits [num_samples x vocab] for the rows in input.samples (tests, golden).
  virtual absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput& input) = 0;

  // Pipelined steps. Launch queues a step and returns; Collect waits for the oldest launched step
  // and returns its output (or its error). At most kMaxStepsInFlight steps are launched and not
  // collected; `input` and what its spans point to must stay unchanged until its Collect, with
  // one exception: the engine writes the real token over a PendingToken at the end of a
  // sample's output once the step before is collected (a backend that samples on the host in
  // Collect reads the real one).
  // PendingToken(j) in the input names samples[j] of the step launched just before this one;
  // only a backend that OverlapsSteps() takes them (the engine pipelines no other). This default
  // runs the step inside Launch and keeps its output (or error) for Collect; the CUDA backend
  // queues it on its stream.
  // Launched steps run in launch order (one stream): the engine gives a finished or cancelled
  // sequence's blocks to the next step while an earlier step that writes them may be in flight,
  // which is safe only because that earlier step completes first.
  static constexpr int32_t kMaxStepsInFlight = 2;
  virtual absl::Status Launch(const StepInput& input) {
    if (done_.size() >= kMaxStepsInFlight) {
      return absl::FailedPreconditionError(
          absl::StrCat("backend ", name(), ": ", kMaxStepsInFlight, " steps are already in flight"));
    }
    absl::StatusOr<StepOutput> out =
        HasPendingTokens(input)
            ? absl::InvalidArgumentError(absl::StrCat(
                  "backend ", name(), " runs each step inside Launch, so its input cannot name "
                  "a token of an earlier step (PendingToken)"))
            : Execute(input);
    Done& done = done_.emplace_back();
    done.status = out.status();
    if (out.ok()) done.output = *std::move(out);
    return absl::OkStatus();
  }
  virtual absl::StatusOr<StepOutput> Collect() {
    if (done_.empty()) return absl::FailedPreconditionError("Collect without a launched step");
    Done done = std::move(done_.front());
    done_.pop_front();
    if (!done.status.ok()) return done.status;
    return std::move(done.output);
  }
  // Whether Launch returns while the step still runs (on a device). Only then does pipelining
  // hide the host's work; a backend that runs the step inside Launch would only deliver every
  // token one step later, so the engine does not pipeline it.
  virtual bool OverlapsSteps() const { return false; }
  // Whether a row sampled as `sample` asks can feed the next step as a PendingToken: false when
  // its token is only known after Collect (the CUDA backend samples penalties over long token
  // lists on the host). The engine then collects the step before it
  // launches the next one.
  virtual bool ChainsSample(const SampleRequest& /*sample*/) const { return true; }

 private:
  struct Done {
    absl::Status status;
    StepOutput output;
  };
  std::deque<Done> done_;  // default Launch: outputs not yet collected
};

}  // namespace rtgen
