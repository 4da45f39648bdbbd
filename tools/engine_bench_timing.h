#pragma once
// rtgen-engine-bench's timed runs over any backend (engine/backend.h): decode TPOT (inputs
// prebuilt, built in the loop, pipelined), batch-1 TTFT and mixed steps, on the host clock with
// the backend waiting for its steps. Host code without CUDA, tested on the CPU backend.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "tools/engine_bench_options.h"
#include "tools/engine_bench_steps.h"

namespace rtgen::tools {

struct DecodeResult {
  double tpot_ms = 0.0;                 // inputs prebuilt
  // The runs that were not asked for (no built repeats, no pipelined run) have no figure.
  std::optional<double> tpot_built_ms;      // inputs built inside the loop
  std::optional<double> tpot_pipelined_ms;  // inputs prebuilt, step i+1 launched before i collected
  std::optional<double> pipelined_tokens_equal;  // share of the pipelined tokens equal to serial
  std::vector<int32_t> tokens;          // every sequence's tokens of the first timed run,
                                        // step-major
  bool graph_replayed = false;          // every step of every run replayed a graph
};

// Runs `one_step` (one more decode step of the timed batch, prebuilt) inside what the caller
// records around it, e.g. the kernels' timeline (--kernel-trace).
using DecodeStepTrace =
    std::function<absl::Status(const std::function<absl::Status()>& one_step)>;

// Called around the timed runs only (after the prefill and the warm-ups, before the trace's
// step), e.g. to sample the GPU's clocks over what the TPOT figures time; either may be empty.
struct TimedWindow {
  std::function<void()> start;
  std::function<void()> stop;
};

// Prefills the `prompt`-token prompts of the batch's sequences [0, count), as many whole prompts
// a step as kBenchMaxNumTokens holds; their samples read `tokens`' prompts (penalties) when
// given.
absl::Status PrefillBatch(Backend& backend, BenchBatch& batch, int32_t count, int32_t prompt,
                          int32_t vocab, const SeqTokens* tokens);

// Prefills a batch of `batch_size` prompts of o.prompt tokens, then times runs of o.steps greedy
// decode steps, each restarting at position o.prompt over the same prefilled KV: o.repeats runs
// with inputs prebuilt, `built_repeats` with inputs built in the loop and, when `pipelined`,
// o.repeats pipelined runs (at most two steps in flight; step i's tokens are PendingToken
// stand-ins for step i-1's samples: a backend that OverlapsSteps()). Each figure is the median
// run's wall time over o.steps. A warm-up run of up to 16 steps comes first (and a pipelined one
// when `pipelined`); `trace`, when set, gets one more step after the timed runs; `window` is
// called around the timed runs.
absl::StatusOr<DecodeResult> TimeDecode(Backend& backend, const ModelConfig& config,
                                        const EngineBenchOptions& o, int32_t batch_size,
                                        int32_t built_repeats, bool pipelined,
                                        const DecodeStepTrace& trace = nullptr,
                                        const TimedWindow& window = {});

// Batch-1 TTFT: one prefill step of `prompt` tokens that samples the first token; the median of
// o.ttft_repeats after one warm-up.
absl::StatusOr<double> TimeTtft(Backend& backend, const ModelConfig& config,
                                const EngineBenchOptions& o, int32_t prompt);

// A mixed step: sequences [0, decode) decode one token at position o.prompt (their prompts
// prefilled once before) beside sequence `decode`'s `prompt`-token prompt, every sequence
// sampled; the step's median wall time of o.ttft_repeats after one warm-up.
absl::StatusOr<double> TimeMixed(Backend& backend, const ModelConfig& config,
                                 const EngineBenchOptions& o, int32_t decode, int32_t prompt);

}  // namespace rtgen::tools
