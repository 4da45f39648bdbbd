#pragma once
// rtgen-engine-bench's command line (tools/engine_bench_main.cc has what each figure means):
// which model shapes, batches, prompts and mixed steps it times, and how (decode steps, repeats,
// sampling). Host code without CUDA, built everywhere and tested by the CPU-only CI.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kernels/sample_penalties.h"

namespace rtgen::tools {

inline constexpr int32_t kBenchBlockSize = 16;      // KV block size, tokens
inline constexpr int32_t kBenchMaxNumTokens = 4096;  // tokens a step: whole prompts, TTFT

struct EngineBenchOptions {
  std::vector<std::string> models = {"smollm2-135m", "llama3.2-1b", "llama3-8b"};
  std::vector<int32_t> batches = {1, 8, 32, 64, 128, 256};
  std::vector<int32_t> ttft_prompts = {128, 2048};
  // Mixed steps timed: {decode rows, prompt tokens} (--mixed D:P,...).
  std::vector<std::pair<int32_t, int32_t>> mixed;
  int32_t prompt = 128;
  int32_t steps = 128;
  int32_t repeats = 5;
  int32_t built_repeats = 3;  // runs with step inputs built inside the timed loop
  int32_t ttft_repeats = 5;
  int32_t max_model_len = 4096;
  bool eager = true;
  bool kernel_trace = false;  // main refuses it where the build does not trace its kernels
  // One more decode step after each graph timing, between cudaProfilerStart and Stop: what
  // `ncu --profile-from-start off` profiles (the timed runs stay unprofiled).
  bool profile_step = false;
  // Each model timed this many times in turn, every round on a backend built anew (its own
  // weights, KV pool, graphs and cuBLASLt handle): does a figure go with the process or with
  // what one backend allocates? Rounds after the first are keyed "NAME#R" in the JSON.
  int32_t model_rounds = 1;
  // Device memory allocated before each backend (spacer_mib) or between its creation and its
  // KV pool and graph capture (kv_spacer_mib), held through its round: the backend's later
  // allocations (and the driver's for its graphs) land elsewhere. 0: none. A diagnostic of the
  // draw (docs/perf/gpu_notes.md, session 77).
  int32_t spacer_mib = 0;
  int32_t kv_spacer_mib = 0;
  bool penalties = false;
  int32_t logprobs = 0;  // top-n logprobs every row asks for
  int32_t max_penalty_tokens = kernels::kDefaultMaxPenaltyTokens;
  bool help = false;
  uint64_t seed = 1;
  int32_t device = 0;
  std::string json_path;
};

// Parses argv[1..argc); an error names the flag (and the value it refused).
absl::StatusOr<EngineBenchOptions> ParseEngineBenchFlags(int argc, const char* const* argv);

// The usage text printed for --help and after a bad flag.
extern const char kEngineBenchUsage[];

// A named Llama shape (engine/model/synthetic_model.h), named as on the command line; an unknown
// name is an error naming --models.
absl::StatusOr<ModelConfig> BenchShape(const std::string& name);

}  // namespace rtgen::tools
