#pragma once
// The steps rtgen-engine-bench hands a backend: a batch of sequences with seeded prompts, each
// owning a fixed range of KV blocks, whose decode steps feed back the tokens last sampled; the
// prompt and output tokens penalties read; and mixed steps joined from a decode and a prefill.
// Host code without CUDA (engine/backend.h's StepInput), built everywhere and tested on the CPU
// backend by the CPU-only CI.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/sampling/sampling_params.h"
#include "tools/engine_bench_options.h"

namespace rtgen::tools {

// Every row's sampling: greedy, after repetition 1.1, presence 0.3 and frequency 0.2 penalties
// with `penalties`, returning its top `logprobs` logprobs.
SamplingParams BenchSampling(bool penalties, int32_t logprobs = 0);

// Whether the CUDA backend samples some decode row's penalties on the host (its rule, at the
// longest output of a run: `steps` tokens after the prompt); such rows do not chain.
bool PenaltiesOnHost(const EngineBenchOptions& o);

// What the rows sample, for the printed header and the JSON settings.
std::string SamplingLabel(const EngineBenchOptions& o);

// KV blocks each sequence of a decode run owns (TimeDecode): its prompt and every decoded token.
int32_t DecodeBlocksPerSeq(const EngineBenchOptions& o);

// KV blocks the sequence of a TTFT run owns (TimeTtft): its prompt and the token it samples.
int32_t TtftBlocks(int32_t prompt);

// KV blocks each sequence of a mixed step owns (TimeMixed): a decode row's prompt and one more
// token, or the longest new prompt.
int32_t MixedBlocksPerSeq(const EngineBenchOptions& o);

// What a backend needs for every run the options ask for: the KV pool's blocks (the largest
// batch's decode, each TTFT prompt, each mixed step) and the sequences one step may hold.
struct BenchKvNeeds {
  int32_t blocks = 0;
  int32_t max_seqs = 0;
};
BenchKvNeeds BenchKv(const EngineBenchOptions& o);

// Sequences of one batch: sequence i owns blocks [i * blocks_per_seq, (i + 1) * blocks_per_seq)
// of kBenchBlockSize tokens.
class BenchBatch {
 public:
  BenchBatch(int32_t size, int32_t blocks_per_seq, uint64_t seed,
             const SamplingParams& params = BenchSampling(false));
  // Steps point at params_: a batch stays where it is while its steps live.
  BenchBatch(const BenchBatch&) = delete;
  BenchBatch& operator=(const BenchBatch&) = delete;

  // Prompt token p of sequence s (the ids a prefill step gets), in [0, vocab).
  int32_t PromptToken(int32_t s, int32_t p, int32_t vocab) const;

  // One step: sequences [first, first + count), each `len` tokens starting at position `start`
  // (len 1 for all: a decode step). Token ids: the last sampled token (decode) or seeded ids.
  // Sample q of the step is sequence first + q's.
  StepInput Step(int32_t first, int32_t count, int32_t start, int32_t len, int32_t vocab) const;

  // Records the sampled tokens of a step over sequences [first, ...); checks their range and
  // that each came with the top logprobs asked for, led by itself.
  absl::Status Take(const StepOutput& out, int32_t first, int32_t vocab);

  int32_t size() const { return size_; }
  const std::vector<int32_t>& last() const { return last_; }

 private:
  int32_t size_;
  int32_t blocks_per_seq_;
  std::vector<int32_t> last_;  // each sequence's last sampled token
  uint64_t seed_;
  SamplingParams params_;  // the steps' samples point here
};

// Each sequence's prompt and output tokens, which a decode step's samples name (penalties read
// them): outputs start from the prefill's tokens; reserved, so the spans stay valid.
struct SeqTokens {
  std::vector<std::vector<int32_t>> prompts, outputs;

  SeqTokens(const BenchBatch& batch, int32_t prompt, int32_t steps, int32_t vocab);
  // Outputs restart from the prefill's sampled tokens.
  void Restart(const std::vector<int32_t>& first);
  // Points the step's samples (sequence s is sample s) at the tokens so far.
  void Name(StepInput& in) const;
};

// Joins two steps of one batch (the same blocks a sequence) into one, b's sequences after a's:
// a mixed step when one decodes.
StepInput JoinSteps(StepInput a, const StepInput& b);

}  // namespace rtgen::tools
