#include "client/bench/prompt_source.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace rtgen::bench {

TokenRange TokenRangeForVocab(int vocab_size, std::optional<int32_t> bos,
                              std::optional<int32_t> eos) {
  TokenRange range;
  // Skip the lowest 1/64 (at most 1000 ids) and the top 1/64 (at least 256 ids when the vocab
  // is large enough): the usual homes of control and reserved tokens.
  range.first = std::min(1000, vocab_size / 64);
  range.last = vocab_size - std::max(std::min(256, vocab_size / 4), vocab_size / 64);
  if (range.last <= range.first) {
    range.first = 0;
    range.last = vocab_size;
  }
  range.bos = bos;
  range.eos = eos;
  return range;
}

absl::StatusOr<std::vector<BenchPrompt>> ParsePromptsJsonl(const std::string& text,
                                                           int default_max_tokens) {
  std::vector<BenchPrompt> prompts;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompts line ", line_number, ": not a JSON object"));
    }
    BenchPrompt prompt;
    prompt.max_tokens = default_max_tokens;
    auto it = object.find("prompt");
    if (it == object.end() || !it->is_string() || it->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompts line ", line_number, ": \"prompt\" must be a non-empty string"));
    }
    prompt.text = it->get<std::string>();
    it = object.find("max_tokens");
    if (it != object.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1 << 20) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompts line ", line_number, ": \"max_tokens\" must be an integer in [1, 2^20]"));
      }
      prompt.max_tokens = static_cast<int>(it->get<int64_t>());
    }
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) return absl::InvalidArgumentError("--prompts: the file has no prompts");
  return prompts;
}

// Longest --input-len / --output-len: twice it (the range's top) plus the other stays in int.
constexpr int kMaxLengthFlag = 1 << 24;

absl::Status PromptSource::CheckConfig(const WorkloadConfig& config) {
  if (config.output_len < 1 || config.output_len > kMaxLengthFlag) {
    return absl::InvalidArgumentError(
        absl::StrCat("--output-len must be in [1, ", kMaxLengthFlag, "]"));
  }
  if (!(config.input_len_range >= 0 && config.input_len_range <= 1)) {
    return absl::InvalidArgumentError("--input-len-range must be in [0, 1]");
  }
  if (!(config.output_len_range >= 0 && config.output_len_range <= 1)) {
    return absl::InvalidArgumentError("--output-len-range must be in [0, 1]");
  }
  if (!config.prompts_file.empty()) return absl::OkStatus();
  if (config.input_len < 1 || config.input_len > kMaxLengthFlag) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input-len must be in [1, ", kMaxLengthFlag, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PromptSource> PromptSource::Create(const WorkloadConfig& config,
                                                  const TokenRange& range) {
  if (absl::Status s = CheckConfig(config); !s.ok()) return s;
  if (range.last <= range.first) {
    return absl::InvalidArgumentError("the model's vocabulary has no ordinary token ids");
  }
  PromptSource source(config, range);
  if (!config.prompts_file.empty()) {
    if (config.shared_prefix_len > 0) {
      return absl::InvalidArgumentError(
          "--shared-prefix-len applies to synthetic prompts, not to --prompts");
    }
    std::ifstream in(config.prompts_file);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("--prompts: cannot read ", config.prompts_file));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    auto prompts = ParsePromptsJsonl(buffer.str(), config.output_len);
    if (!prompts.ok()) return prompts.status();
    source.file_prompts_ = *std::move(prompts);
    return source;
  }
  if (config.shared_prefix_len < 0) {
    return absl::InvalidArgumentError("--shared-prefix-len must be >= 0");
  }
  const int shortest = static_cast<int>(std::floor(config.input_len * (1 - config.input_len_range)));
  if (config.shared_prefix_len >= std::max(shortest, 1)) {
    return absl::InvalidArgumentError(
        "--shared-prefix-len must be shorter than the shortest prompt (--input-len and "
        "--input-len-range)");
  }
  // The prefix draws from its own generator so it does not depend on the other flags.
  std::mt19937_64 prefix_rng(config.seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_int_distribution<int32_t> id(range.first, range.last - 1);
  while (static_cast<int>(source.prefix_.size()) < config.shared_prefix_len) {
    const int32_t t = id(prefix_rng);
    if (t != range.bos && t != range.eos) source.prefix_.push_back(t);
  }
  return source;
}

PromptSource::PromptSource(const WorkloadConfig& config, const TokenRange& range)
    : config_(config), range_(range), rng_(config.seed) {}

PromptSource::PromptSource(PromptSource&& other) noexcept
    : config_(std::move(other.config_)),
      range_(other.range_),
      prefix_(std::move(other.prefix_)),
      file_prompts_(std::move(other.file_prompts_)),
      next_file_prompt_(other.next_file_prompt_),
      rng_(std::move(other.rng_)) {}

std::pair<int, int> PromptSource::LengthBounds(int len, double range) {
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - range))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + range))));
  return {lo, hi};
}

int PromptSource::DrawLength(int len, double range) {
  const auto [lo, hi] = LengthBounds(len, range);
  return std::uniform_int_distribution<int>(lo, hi)(rng_);
}

std::optional<int> PromptSource::LongestSyntheticRequest() const {
  if (!file_prompts_.empty()) return std::nullopt;
  const int prompt = std::max(LengthBounds(config_.input_len, config_.input_len_range).second,
                              config_.shared_prefix_len + 1);
  return prompt + LengthBounds(config_.output_len, config_.output_len_range).second;
}

BenchPrompt PromptSource::Next() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_prompts_.empty()) {
    BenchPrompt prompt = file_prompts_[next_file_prompt_];
    next_file_prompt_ = (next_file_prompt_ + 1) % file_prompts_.size();
    return prompt;
  }
  BenchPrompt prompt;
  const int input_len =
      std::max(DrawLength(config_.input_len, config_.input_len_range), config_.shared_prefix_len + 1);
  prompt.max_tokens = DrawLength(config_.output_len, config_.output_len_range);
  prompt.token_ids = prefix_;
  std::uniform_int_distribution<int32_t> id(range_.first, range_.last - 1);
  while (static_cast<int>(prompt.token_ids.size()) < input_len) {
    const int32_t t = id(rng_);
    if (t != range_.bos && t != range_.eos) prompt.token_ids.push_back(t);
  }
  return prompt;
}

}  // namespace rtgen::bench
