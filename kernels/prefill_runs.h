#pragma once
// How prefill attention's two kernels share a step's query tokens (host and device code; CPU
// tests: tests/kernels_host/prefill_runs_test.cc). The tokens are cut into blocks of
// kPrefillBlockRows consecutive ones; a block's rows fall into *runs*, each the rows of one
// sequence from its first to its last row in the block (padding rows, position < 0, belong to no
// sequence and do not end a run). The tensor-core kernel (prefill_attention_mma.h) walks a
// sequence's keys once per run, one run after another, so it serves the blocks of at most
// kPrefillMaxRuns runs; the CUDA-core kernel (one block per token and head, all in parallel)
// serves the rest, e.g. several short prompts in one block (a mixed step's decode rows go to
// decode attention: ModelForward::SplitsDecodeRows). Both decide a block's owner with
// PrefillRuns over the same rows.

#include <cstdint>

#ifdef __CUDACC__
#define RTGEN_PREFILL_RUNS_FN __host__ __device__ __forceinline__
#else
#define RTGEN_PREFILL_RUNS_FN inline
#endif

namespace rtgen::kernels {

constexpr int kPrefillBlockRows = 64;
constexpr int kPrefillMaxRuns = 2;

// The first run at or after row r0 of a block whose row r belongs to sequence seq[r] (-1:
// padding): its sequence (-1: no run left), rows [*begin, *end). Runs are maximal: the row at
// *end, if any, belongs to another sequence.
RTGEN_PREFILL_RUNS_FN int32_t NextPrefillRun(const int32_t* seq, int r0, int* begin, int* end) {
  while (r0 < kPrefillBlockRows && seq[r0] < 0) ++r0;
  *begin = r0;
  if (r0 == kPrefillBlockRows) {
    *end = r0;
    return -1;
  }
  const int32_t s = seq[r0];
  int r1 = r0 + 1;
  while (r1 < kPrefillBlockRows && (seq[r1] == s || seq[r1] < 0)) ++r1;
  *end = r1;
  return s;
}

// The number of runs among a block's rows (seq as for NextPrefillRun).
RTGEN_PREFILL_RUNS_FN int PrefillRuns(const int32_t* seq) {
  int runs = 0, begin = 0, end = 0;
  while (NextPrefillRun(seq, end, &begin, &end) >= 0) ++runs;
  return runs;
}

}  // namespace rtgen::kernels

#undef RTGEN_PREFILL_RUNS_FN
