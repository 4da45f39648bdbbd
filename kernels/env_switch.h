#pragma once
// The GPU path's A/B switches (RTGEN_PDL, RTGEN_GEMV_PDL, RTGEN_GEMV_WIDE, RTGEN_MATMUL_TUNE,
// RTGEN_MATMUL_TUNE_CACHE (a file: matmul_tune_cache.h), RTGEN_MATMUL_TUNE_RANKED (a file:
// matmul.cc), RTGEN_MATMUL_SHIPPED, RTGEN_SWIGLU_GEMV,
// RTGEN_QKV_ROPE_GEMV, RTGEN_DECODE_COMBINE, RTGEN_DECODE_MERGE_IN_O, RTGEN_DECODE_MIN_PARTITION,
// RTGEN_DECODE_MMA,
// RTGEN_DECODE_MMA_WARPS, RTGEN_DECODE_MMA_SIXTEEN, RTGEN_DECODE_MMA128_SPLITS,
// RTGEN_DECODE_SPLITS, RTGEN_PERSISTENT_DECODE, RTGEN_GEMV_EVICT_FIRST_MB, RTGEN_GEMV_ROWS_MIN_MB,
// RTGEN_GEMV_SLAB, RTGEN_GEMV_SLICED_ROWS,
// RTGEN_ROPE_EARLY_DEPENDENTS, RTGEN_NORM_LINK, RTGEN_NORM_LINK_ROWS, RTGEN_NORM_FOLD,
// RTGEN_DECODE_PREFETCH, RTGEN_DECODE_ROPE, RTGEN_SAMPLE_BLOCKS_PER_SM, RTGEN_PREFILL_MMA,
// RTGEN_PREFILL_GROUPS, RTGEN_PREFILL_GRAPHS, RTGEN_MIXED_GRAPHS, RTGEN_MIXED_DECODE,
// RTGEN_TC_ROPE_EARLY_DEPENDENTS,
// RTGEN_HOPPER_GEMM, RTGEN_HOPPER_GEMM_TILE, RTGEN_PERSISTENT_KEYS_PER_PART,
// RTGEN_ATTENTION_CLUSTER, RTGEN_FUSED_MLP, RTGEN_FUSED_MLP_FEATURES, and the diagnostics
// RTGEN_DIAG_SKIP and RTGEN_PERSISTENT_TRACE) are environment variables, each consulted by one
// function (those on a per-launch path keep the value in a static; those read at start-up read
// it when called); these helpers are how every one of them is read.

#include <cstdlib>
#include <cstring>

namespace rtgen::kernels {

// The variable's value; `unset` when it is not set.
inline const char* EnvValue(const char* name, const char* unset = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : unset;
}

// True when the variable equals `value`.
inline bool EnvIs(const char* name, const char* value) {
  return std::strcmp(EnvValue(name), value) == 0;
}

// `unset` when the variable is not set; otherwise true unless it is "0".
inline bool EnvOnUnlessZero(const char* name, bool unset = true) {
  const char* v = std::getenv(name);
  return v == nullptr ? unset : std::strcmp(v, "0") != 0;
}

}  // namespace rtgen::kernels
