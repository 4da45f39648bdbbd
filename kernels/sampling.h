#pragma once
// On-device token sampling, one block per logits row (a greedy row may use several, see
// SampleTokensParams::splits), mirroring engine/sampling/sampler.h:
//  - penalties first (SampleRowParams): repetition over the row's distinct prompt and output
//    tokens, then presence and frequency over its output tokens, each logit computed with the
//    CPU sampler's operations in the same order and rounding, so the penalized logits are the
//    CPU's bit for bit;
//  - temperature 0: greedy argmax, lowest id on ties;
//  - otherwise logits /= temperature, then top-k, top-p, min-p, and a draw with
//    u = CounterUniform(seed, counter), bit-identical to the CPU's splitmix64 uniform.
// Candidates kept by top-k/top-p are a prefix of the order (logit desc, id asc), found by a
// bitwise search over 64-bit keys, so no sort is needed. The draw walks candidates in the same
// order as the CPU sampler: sorted order when top-p or top-k is active, id order otherwise.
// The logprob returned is log softmax of the penalized, temperature-scaled logits at the chosen
// token; a row with SampleRowParams::top_logprobs = n also gets the n most likely tokens of
// those logits, most likely first and the lowest id first on ties (the CPU's order), with their
// logprobs.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sample_row_params.h"

namespace rtgen::kernels {

struct SampleTokensParams {
  float* logits = nullptr;                // [num_rows, row_stride]; scaled in place
  int64_t row_stride = 0;                 // >= vocab
  const SampleRowParams* rows = nullptr;  // [num_rows], device memory
  int32_t* token_ids = nullptr;           // [num_rows] out
  float* logprobs = nullptr;              // [num_rows] out
  int32_t num_rows = 0;
  int32_t vocab = 0;
  // Greedy rows reduced by `splits` blocks each (grid.y; PlanSampleSplits), which a batch of
  // few rows needs to use the GPU: > 1 needs split_states ([num_rows * splits] states of
  // kSampleSplitStateBytes) and split_counters ([num_rows] zeros before the first launch; each
  // launch leaves them zero). Sampled rows always use one block.
  int32_t splits = 1;
  void* split_states = nullptr;
  int32_t* split_counters = nullptr;
  // Optional [num_rows] out: the same tokens at addresses fixed for the process, where the next
  // step's embedding reads a pending token (kernels/embedding.h). Null: not written.
  int32_t* chain_token_ids = nullptr;
  // Rows with penalties (SampleRowParams::penalty_count > 0 or penalty_pending >= 0) read their
  // entries here and their pending token in resolved_token_ids ([tokens of the step], written by
  // the step's embedding: kernels/embedding.h). Read only for rows with penalties (may be null
  // when there are none).
  const SamplePenaltyEntry* penalty_entries = nullptr;
  const int32_t* resolved_token_ids = nullptr;
  // [num_rows, kMaxTopLogprobs] out: row r's top-n in top[r * kMaxTopLogprobs, + n). Written
  // only for rows with top_logprobs > 0 (may be null when there are none).
  SampleTopEntry* top = nullptr;
  // [num_rows * splits, kMaxTopLogprobs] keys: a split greedy row's parts' top-n lists. Needed
  // with `top` when splits > 1.
  uint64_t* split_top = nullptr;
};

constexpr int32_t kMaxSampleSplits = 32;
constexpr size_t kSampleSplitStateBytes = 16;

// Blocks per greedy row for `num_rows` rows on `num_sms` multiprocessors (1..kMaxSampleSplits).
int32_t PlanSampleSplits(int32_t num_rows, int32_t vocab, int32_t num_sms);

cudaError_t SampleTokens(SampleTokensParams p, cudaStream_t stream);

// out[i] = CounterUniform(seeds[i], counters[i]) computed on the device (for tests).
cudaError_t CounterUniformBatch(const uint64_t* seeds, const uint64_t* counters, float* out,
                                int32_t n, cudaStream_t stream);

}  // namespace rtgen::kernels
