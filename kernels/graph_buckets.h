#pragma once
// The sizes CUDA graphs are captured for (graph_runner.h) and when a prefill step is worth
// padding up to one: host code without CUDA, built everywhere, so the CPU-only CI tests the
// bucket policy (tests/kernels_host).

#include <cstdint>
#include <vector>

namespace rtgen {

// 1, 2, 4, 8, 16, 24, 32, then every 16 up to max_batch (max_batch itself always included).
std::vector<int32_t> DefaultGraphBuckets(int32_t max_batch);

// Prefill token buckets: 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, then every 256 up to
// max_tokens (max_tokens itself included when it is not one of them; none when it is below 1):
// past 32 tokens a chunk is padded by at most about half its size. 48: the most rows SmolLM2-135M's
// layers take on the GEMV (matmul.cc GemvMaxRows), so chunks of 33-48 tokens are not padded past
// it.
std::vector<int32_t> DefaultPrefillGraphTokens(int32_t max_tokens);

// Sequence counts of the multi-sequence prefill graphs of a token bucket (prefill chunks of
// several sequences, decode rows among them: a mixed step; their variants): 2, 4, 8, ... up to
// min(tokens, max_seqs), that value included; none below 2.
std::vector<int32_t> DefaultMixedGraphSeqs(int32_t tokens, int32_t max_seqs);

// Whether a prefill step of `tokens` tokens gains by replaying the graph of `bucket` tokens
// (>= tokens): the time the padding rows' matmuls add, estimated from the model's layer
// parameters (2 FLOP each per token), must be below the launches the graph saves (~6 us a
// layer). Rates measured on the H200 (session 41, TTFT at batch 1): past 128 tokens a token
// costs 2 * params / ~750 TFLOP/s (Llama-3-8B: 5.6 ms at 128 tokens, 13.7 at 512), below it
// 2 * params / ~2.5 PFLOP/s (the weight stream dominates: 4.9 ms at 16); graphs saved 0.1-0.3 ms
// at 16-128 tokens. So SmolLM2-135M pads any chunk up to 512, Llama-3.2-1B up to ~37 tokens
// past 128 and Llama-3-8B ~10 (~34 below 128). Before this rule a 257-token chunk of Llama-3-8B
// replayed the 512-token graph (~5 ms lost). A mixed graph's padding sequences add logits rows
// and their sampling too, not counted (a few rows of one LM head launch).
bool PrefillPaddingPays(int64_t layer_params, int32_t num_layers, int32_t tokens,
                        int32_t bucket);

}  // namespace rtgen
