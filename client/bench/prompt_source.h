#pragma once
// The prompts a benchmark sends: synthetic token-id prompts of fixed or uniformly drawn lengths
// (optionally all starting with one shared prefix), or text prompts read from a JSONL file.

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace rtgen::bench {

// One request's input. Exactly one of token_ids (synthetic) and text (file) is non-empty.
struct BenchPrompt {
  std::vector<int32_t> token_ids;
  std::string text;
  int max_tokens = 0;  // exact output length (sent with ignore_eos)
};

struct WorkloadConfig {
  int input_len = 128;           // prompt tokens, including the shared prefix
  double input_len_range = 0;    // lengths uniform in [len * (1 - r), len * (1 + r)], r in [0, 1]
  int output_len = 128;
  double output_len_range = 0;
  int shared_prefix_len = 0;     // tokens every synthetic prompt starts with
  std::string prompts_file;      // JSONL; when set, prompts come from it (cycled in order)
  uint64_t seed = 0;
};

// Token ids a synthetic prompt may use: [first, last), never bos/eos. Special tokens sit at the
// start (SmolLM2, GPT-2 style) or the end (Llama 3) of a vocabulary, so both ends are skipped.
struct TokenRange {
  int32_t first = 0;
  int32_t last = 0;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
};
TokenRange TokenRangeForVocab(int vocab_size, std::optional<int32_t> bos,
                              std::optional<int32_t> eos);

// Parses JSONL text: one {"prompt": string, "max_tokens": int (optional; default_max_tokens)}
// per non-empty line. Errors name the line and the field.
absl::StatusOr<std::vector<BenchPrompt>> ParsePromptsJsonl(const std::string& text,
                                                           int default_max_tokens);

// Hands out prompts; Next() is safe to call from several threads.
class PromptSource {
 public:
  // Checks `config` (lengths positive, ranges in [0, 1], prefix shorter than the prompt, the
  // file readable and well-formed) and errors naming the bad flag.
  static absl::StatusOr<PromptSource> Create(const WorkloadConfig& config, const TokenRange& range);
  // The checks of Create that need neither the server's vocabulary nor the prompts file:
  // rtgen-bench runs them before it connects (a bad length waited out --wait-ready first).
  static absl::Status CheckConfig(const WorkloadConfig& config);

  PromptSource(PromptSource&& other) noexcept;
  BenchPrompt Next();
  // Prompt + output tokens of the longest request Next() can draw; nullopt for file prompts
  // (text, its token count is the server's to know).
  std::optional<int> LongestSyntheticRequest() const;

 private:
  PromptSource(const WorkloadConfig& config, const TokenRange& range);
  // The inclusive range DrawLength draws from for `len` and `range`.
  static std::pair<int, int> LengthBounds(int len, double range);
  int DrawLength(int len, double range);

  WorkloadConfig config_;
  TokenRange range_;
  std::vector<int32_t> prefix_;
  std::vector<BenchPrompt> file_prompts_;
  size_t next_file_prompt_ = 0;
  std::mt19937_64 rng_;
  std::mutex mu_;
};

}  // namespace rtgen::bench
