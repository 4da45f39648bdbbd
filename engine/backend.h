#pragma once
// The interface every compute backend (CPU reference, CUDA) implements. The engine hands it one
// step as plain data; the backend owns all weights, KV memory and device pointers.
//
// A step is a flat list of tokens from several sequences (prefill chunks and single decode
// tokens), described CSR-style: sequence s owns tokens [query_start[s], query_start[s+1]).
// KV for token t is written to slot slot_mapping[t] = block * block_size + offset (-1: skip, for
// padded rows). Attention for sequence s reads its first context_lens[s] positions through its
// block table row, causally (a token at position p sees positions <= p).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace rtgen {

// What one sequence in the step needs sampled (only sequences whose last prompt token or decode
// token is in this step sample).
struct SampleRequest {
  int32_t seq_index = 0;             // index into the step's sequences
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt;   // for penalties
  std::span<const int32_t> output;   // tokens generated so far; output.size() is the RNG counter
  uint64_t seed = 0;
};

struct StepInput {
  std::vector<int32_t> token_ids;      // [num_tokens]
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
};

struct KvCacheShape {
  int32_t num_blocks = 0;
  int32_t block_size = 16;             // tokens per block
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Allocates the KV pool (all layers). Called once before the first Execute.
  virtual absl::Status AllocateKvCache(const KvCacheShape& shape) = 0;
  // Blocks the KV pool could hold within `memory_bytes` (for sizing from free memory).
  virtual int64_t KvBytesPerBlock(int32_t block_size) const = 0;
  // Runs the forward pass for the step and samples the requested rows.
  virtual absl::StatusOr<StepOutput> Execute(const StepInput& input) = 0;
  // Forward only: logits [num_samples x vocab] for the rows in input.samples (tests, golden).
  virtual absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput& input) = 0;
};

}  // namespace rtgen
