#pragma once
// The GPU path's A/B switches (RTGEN_PDL, RTGEN_GEMV_PDL, RTGEN_GEMV_WIDE, RTGEN_MATMUL_TUNE,
// RTGEN_MATMUL_TUNE_CACHE (a file: matmul_tune_cache.h), RTGEN_MATMUL_TUNE_RANKED (a file:
// matmul.cc), RTGEN_MATMUL_SHIPPED, RTGEN_SWIGLU_GEMV,
// RTGEN_QKV_ROPE_GEMV, RTGEN_STEP_COPIES, RTGEN_DECODE_COMBINE, RTGEN_DECODE_MERGE_IN_O,
// RTGEN_DECODE_MIN_PARTITION,
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
// RTGEN_DIAG_SKIP, RTGEN_DIAG_ALLOC_LOG and RTGEN_PERSISTENT_TRACE) are environment variables,
// each consulted by one function (those on a per-launch path keep the value in a static; those
// read at start-up read it when called); these helpers are how every one of them is read.
// EnvOnUnlessZero, EnvOptIn, EnvInt, EnvIntIn (a range), EnvIntOf (a set of numbers) and
// EnvChoice (the switches that take words: RTGEN_PREFILL_MMA, RTGEN_HOPPER_GEMM,
// RTGEN_GEMV_SLAB, RTGEN_DECODE_MERGE_IN_O, ...) report a value they do not take and use the
// switch's default instead.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>

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

// Says on stderr, once a process for each variable, that its value is none the switch knows and
// what was taken instead: a typo ("off", "true", "0x18") must not pass for a setting unnoticed.
inline void ReportUnknownEnvValue(const char* name, const char* value, const char* taken) {
  static std::mutex mu;
  static std::set<std::string>* const reported = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (!reported->insert(name).second) return;
  std::fprintf(stderr, "rtgen: %s='%s' is not a value it takes; using %s\n", name, value, taken);
}

// `unset` when the variable is not set; "0" off, "1" on; anything else is reported and taken as
// `unset`.
inline bool EnvOnUnlessZero(const char* name, bool unset = true) {
  const char* v = std::getenv(name);
  if (v == nullptr) return unset;
  if (std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  ReportUnknownEnvValue(name, v, unset ? "the default (on)" : "the default (off)");
  return unset;
}

// An opt-in switch: on only when "1"; unset or "0" off; anything else reported, off.
inline bool EnvOptIn(const char* name) { return EnvOnUnlessZero(name, /*unset=*/false); }

// A whole decimal integer; `fallback` when unset or empty. Anything else ("four", "0x18", "12k")
// is reported and taken as `fallback`.
inline long long EnvInt(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(v, &end, 10);
  if (errno == 0 && end != v && *end == '\0') return parsed;
  ReportUnknownEnvValue(name, v, ("the default (" + std::to_string(fallback) + ")").c_str());
  return fallback;
}

// EnvInt within [lo, hi]: a number outside is reported and taken as `fallback` too (a switch's
// own range check used to fall back silently: RTGEN_DECODE_MMA_WARPS=6 ran the automatic choice
// unsaid).
inline long long EnvIntIn(const char* name, long long lo, long long hi, long long fallback) {
  if (*EnvValue(name) == '\0') return fallback;  // unset: the fallback, in range or not
  const long long v = EnvInt(name, fallback);
  if (v >= lo && v <= hi) return v;
  ReportUnknownEnvValue(name, EnvValue(name),
                        ("the default (" + std::to_string(fallback) + "; it takes " +
                         std::to_string(lo) + " to " + std::to_string(hi) + ")").c_str());
  return fallback;
}

// EnvInt among `allowed`: any other number is reported and taken as `fallback`.
inline long long EnvIntOf(const char* name, std::initializer_list<long long> allowed,
                          long long fallback) {
  if (*EnvValue(name) == '\0') return fallback;  // unset: the fallback
  const long long v = EnvInt(name, fallback);
  for (long long a : allowed) {
    if (v == a) return v;
  }
  std::string takes;
  for (long long a : allowed) takes += (takes.empty() ? "" : ", ") + std::to_string(a);
  ReportUnknownEnvValue(name, EnvValue(name),
                        ("the default (" + std::to_string(fallback) + "; it takes " + takes +
                         ")").c_str());
  return fallback;
}

// The index in `words` of the variable's value; `fallback` (the index of the default word, or -1
// for a default that is none of them) when it is unset or empty, and for any other value, which
// is reported with the default taken ("on", "ALL", "1 " are none of the words).
inline int EnvChoice(const char* name, std::initializer_list<const char*> words,
                     int fallback = -1) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int index = 0;
  for (const char* w : words) {
    if (std::strcmp(v, w) == 0) return index;
    ++index;
  }
  std::string taken = "the default";
  if (fallback >= 0 && fallback < static_cast<int>(words.size())) {
    taken += std::string(" (") + words.begin()[fallback] + ")";
  }
  ReportUnknownEnvValue(name, v, taken.c_str());
  return fallback;
}

}  // namespace rtgen::kernels
