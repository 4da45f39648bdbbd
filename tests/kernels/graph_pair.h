#pragma once
// A graph backend and its eager twin on the same weights, for tests that compare a replayed
// prefill or mixed step with the eager one (prefill_graph_test.cc, mixed_graph_test.cc); its
// per-row sample check is also graph_runner_test.cc's.

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "kernels/cuda_backend.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {

constexpr int32_t kPairBlocks = 256;

// A padded step against the eager one: bf16 activations over 30 layers make logits agree to
// ~1e-2 relative L2, ~2e-2 at worst (the real file's GPU-CPU check sees 0.026 at a prompt's last
// row); at logits of magnitude ~10 that moves a logprob by up to half a unit, and the two steps'
// errors add. Measured at a 1-token chunk (which runs the one-row GEMV path with linked norms
// when eager) over 12 seeds on an H100 (session 61), each top-5 logprob against the CPU
// backend's: the eager step up to 0.47, the padded graph up to 0.39; between them 0.71 (errors of
// opposite signs: the bound of 0.6 before failed 1 of 17 runs). A padding row sampled in place
// of the last real row, or one that attended, misses by whole units and changes the top-5 ids.
constexpr double kPaddedRelL2 = 3e-2;
constexpr float kPaddedLogprob = 1.0f;

struct Pair {
  std::unique_ptr<CudaBackend> graph, eager;
  std::vector<int32_t> next = {0, 0};  // next free KV block of each
};

// The graph backend: decode bucket {1}, prefill graphs of `tokens`, multi-sequence ones
// with `mixed`; up to 16 sequences a step.
Pair MakePair(const ModelConfig& c, uint64_t seed, std::vector<int32_t> tokens,
              bool mixed = true);

// Three decode steps fed the same random tokens on both backends (the graph one replays its
// decode graph, bitwise equal to eager: graph_runner_test.cc): each step's logits, which read
// every key the earlier steps stored, compared bitwise (max_rel_l2 0) or by relative L2 error.
void ExpectDecodeLogits(Pair& p, const ModelConfig& c, TestSeq& g, TestSeq& e,
                        std::mt19937_64& rng, double max_rel_l2);

// Every device sampling feature the graphs' sampler reads from the step's buffers: temperature,
// top-k/p, a repetition penalty over the prompt and output, top-5 logprobs (seeds: TestSeq).
SamplingParams RichParams();

// One row's sampled token and top-n ids equal on both backends, its logprobs equal (tolerance 0:
// compared by ==, which -inf passes and a difference would not) or within `tolerance`.
void ExpectSameSample(const SampledToken& g, const SampledToken& e, float tolerance = 0.0f);

// The same sampled tokens, logprobs and top-n lists, bit for bit (ExpectSameSample per row).
void ExpectSameSamples(const StepOutput& g, const StepOutput& e);

// Close distributions (top-5 asked for): the top-1 and top-5 logprobs within kPaddedLogprob,
// and at least 3 of the top-5 in common (a padding row sampled in place of a real one, having
// seen no key, would share next to nothing with it).
void ExpectCloseSamples(const StepOutput& g, const StepOutput& e);

}  // namespace rtgen::testing_gpu
