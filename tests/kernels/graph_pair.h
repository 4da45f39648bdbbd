#pragma once
// A graph backend and its eager twin on the same weights, for tests that compare a replayed
// prefill or mixed step with the eager one (prefill_graph_test.cc, mixed_graph_test.cc).

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

struct Pair {
  std::unique_ptr<CudaBackend> graph, eager;
  std::vector<int32_t> next = {0, 0};  // next free KV block of each
};

// The graph backend: decode bucket {1}, prefill graphs of `tokens`, multi-sequence ones
// with `mixed`; up to 16 sequences a step.
Pair MakePair(const ModelConfig& c, uint64_t seed, std::vector<int32_t> tokens,
              bool mixed = true);

std::vector<int32_t> RandomTokens(const ModelConfig& c, int n, std::mt19937_64& rng);

// Three decode steps fed the same random tokens on both backends (the graph one replays its
// decode graph, bitwise equal to eager: graph_runner_test.cc): each step's logits, which read
// every key the earlier steps stored, compared bitwise (max_rel_l2 0) or by relative L2 error.
void ExpectDecodeLogits(Pair& p, const ModelConfig& c, TestSeq& g, TestSeq& e,
                        std::mt19937_64& rng, double max_rel_l2);

}  // namespace rtgen::testing_gpu
