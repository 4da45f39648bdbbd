#include "tools/engine_bench_options.h"

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/synthetic_model.h"
#include "kernels/sample_row_params.h"

namespace rtgen::tools {
namespace {

// "a,b,c": names, or positive integers; false for an empty item (a trailing comma too), a bad
// number or no item.
template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  out->clear();
  if (!text.empty() && text.back() == ',') return false;  // getline yields no last empty item
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) return false;
    if constexpr (std::is_same_v<T, std::string>) {
      out->push_back(item);
    } else {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (*end != '\0' || v <= 0 || v > (1 << 30)) return false;
      out->push_back(static_cast<T>(v));
    }
  }
  return !out->empty();
}

// "D:P,D:P": decode rows and prompt tokens of each mixed step.
bool ParseMixed(const std::string& text, std::vector<std::pair<int32_t, int32_t>>* out) {
  out->clear();
  if (!text.empty() && text.back() == ',') return false;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    std::vector<int32_t> decode, prompt;
    if (colon == std::string::npos || !ParseList(item.substr(0, colon), &decode) ||
        !ParseList(item.substr(colon + 1), &prompt) || decode.size() != 1 ||
        prompt.size() != 1) {
      return false;
    }
    out->emplace_back(decode[0], prompt[0]);
  }
  return !out->empty();
}

// An error naming `flag` and the first value it lists twice, or OK.
template <typename T>
absl::Status CheckDistinct(const char* flag, const std::vector<T>& values) {
  std::set<T> seen;
  for (const T& v : values) {
    if (!seen.insert(v).second) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", v, " is given twice"));
    }
  }
  return absl::OkStatus();
}

// --json's file must be creatable: it names a file, not a directory, and its directory exists
// (checked before any model is timed).
absl::Status CheckJsonPath(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  const std::filesystem::path file(path);
  std::error_code ec;
  if (!file.has_filename() || std::filesystem::is_directory(file, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--json: '", path, "' is a directory, not a file"));
  }
  const std::filesystem::path dir = file.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--json: no directory '", dir.string(), "' for ", path));
  }
  return absl::OkStatus();
}

// The limits one flag's value cannot check alone.
absl::Status CheckTogether(const EngineBenchOptions& o) {
  // Rows are keyed by batch size, models by name and TTFT figures by prompt.
  RETURN_IF_ERROR(CheckDistinct("--batches", o.batches));
  RETURN_IF_ERROR(CheckDistinct("--models", o.models));
  // Every name before any timing: a typo in the last one used to fail after the first models'
  // minutes of device time.
  for (const std::string& name : o.models) RETURN_IF_ERROR(BenchShape(name).status());
  RETURN_IF_ERROR(CheckDistinct("--ttft-prompts", o.ttft_prompts));
  RETURN_IF_ERROR(CheckJsonPath(o.json_path));
  // Both are one more step after a timing, each its own way.
  if (o.kernel_trace && o.profile_step) {
    return absl::InvalidArgumentError("--kernel-trace and --profile-step: one at a time");
  }
  if (o.prompt > kBenchMaxNumTokens || o.prompt + o.steps > o.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt must be <= ", kBenchMaxNumTokens,
                                                   " and prompt + steps <= --max-model-len"));
  }
  for (int32_t p : o.ttft_prompts) {
    if (p > kBenchMaxNumTokens || p >= o.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ttft-prompts: ", p, " must be <= ", kBenchMaxNumTokens, " and < --max-model-len"));
    }
  }
  for (int32_t b : o.batches) {
    if (b > kBenchMaxNumTokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: ", b, " is above ", kBenchMaxNumTokens));
    }
    // Every sequence of the batch holds prompt + steps tokens in whole blocks; cache slots are
    // int32 (the backends' slot mapping).
    const int64_t blocks = (int64_t{o.prompt} + o.steps + kBenchBlockSize - 1) / kBenchBlockSize;
    if (int64_t{b} * blocks * kBenchBlockSize > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batches ", b, " x (--prompt + --steps) needs ", int64_t{b} * blocks * kBenchBlockSize,
          " KV cache slots, more than int32 holds"));
    }
  }
  for (const auto& [decode, prompt] : o.mixed) {
    if (prompt < 2 || decode + prompt > kBenchMaxNumTokens || prompt >= o.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mixed: ", decode, ":", prompt, " must have prompt >= 2 (one token is a decode row), ",
          "decode + prompt <= ", kBenchMaxNumTokens, " and prompt < --max-model-len"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineBenchOptions> ParseEngineBenchFlags(int argc, const char* const* argv) {
  EngineBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (a == "--no-eager") {
      o.eager = false;
      continue;
    }
    if (a == "--penalties") {
      o.penalties = true;
      continue;
    }
    if (a == "--kernel-trace") {
      o.kernel_trace = true;
      continue;
    }
    if (a == "--profile-step") {
      o.profile_step = true;
      continue;
    }
    // The flag is named first (an unknown one as unknown), then its value checked.
    const bool has_value = i + 1 < argc;
    const std::string v = has_value ? argv[i + 1] : "";
    char* end = nullptr;
    const long parsed = std::strtol(v.c_str(), &end, 10);
    const int32_t n =
        !v.empty() && *end == '\0' && parsed >= 0 && parsed <= (1 << 30) ? parsed : -1;
    bool ok = true;
    if (a == "--models") ok = ParseList(v, &o.models);
    else if (a == "--batches") ok = ParseList(v, &o.batches);
    else if (a == "--ttft-prompts") ok = ParseList(v, &o.ttft_prompts);
    else if (a == "--mixed") ok = ParseMixed(v, &o.mixed);
    else if (a == "--prompt") ok = (o.prompt = n) > 0;
    else if (a == "--steps") ok = (o.steps = n) > 0;
    else if (a == "--repeats") ok = (o.repeats = n) > 0;
    else if (a == "--built-repeats") ok = (o.built_repeats = n) >= 0;
    else if (a == "--ttft-repeats") ok = (o.ttft_repeats = n) > 0;
    else if (a == "--max-model-len") ok = (o.max_model_len = n) > 0;
    else if (a == "--seed") ok = n >= 0, o.seed = static_cast<uint64_t>(n);
    else if (a == "--device") ok = (o.device = n) >= 0;
    else if (a == "--json") ok = !(o.json_path = v).empty();
    else if (a == "--max-penalty-tokens") ok = (o.max_penalty_tokens = n) >= 0;
    else if (a == "--logprobs") ok = (o.logprobs = n) >= 0 && n <= kernels::kMaxTopLogprobs;
    else if (a == "--model-rounds") ok = (o.model_rounds = n) > 0;
    else if (a == "--spacer-mib") ok = (o.spacer_mib = n) >= 0;
    else if (a == "--kv-spacer-mib") ok = (o.kv_spacer_mib = n) >= 0;
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    if (!has_value) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
    ++i;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", a, ": '", v, "'"));
  }
  RETURN_IF_ERROR(CheckTogether(o));
  return o;
}

const char kEngineBenchUsage[] =
    "usage: rtgen-engine-bench [--models smollm2-135m,llama3.2-1b,llama3-8b]\n"
    "                          [--batches 1,8,32,64,128,256] [--prompt 128] [--steps 128]\n"
    "                          [--repeats 5] [--built-repeats 3] [--ttft-repeats 5]\n"
    "                          [--ttft-prompts 128,2048] [--no-eager] [--max-model-len 4096]\n"
    "                          [--seed 1] [--device 0] [--json FILE] [--kernel-trace]\n"
    "                          [--penalties] [--max-penalty-tokens 4096] [--logprobs 0]\n"
    "                          [--mixed DECODE:PROMPT,...] [--profile-step]\n"
    "                          [--model-rounds 1] [--spacer-mib 0] [--kv-spacer-mib 0]\n"
    "Decode TPOT of the CUDA backend at real model shapes (random bf16 weights) against the\n"
    "memory-bandwidth floor, graphs vs eager, TTFT and start-up. Switches read from the\n"
    "environment include RTGEN_MATMUL_TUNE (0 / wide), RTGEN_MATMUL_TUNE_CACHE=FILE and\n"
    "RTGEN_NORM_FOLD=0 (kernels/env_switch.h lists them all).\n";

absl::StatusOr<ModelConfig> BenchShape(const std::string& name) {
  if (name == "tiny") {  // SyntheticShape's test shape: not a model this benchmark times
    return absl::InvalidArgumentError("--models: 'tiny' is a test shape, not a model to time");
  }
  absl::StatusOr<ModelConfig> c = SyntheticShape(name);
  if (!c.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--models: unknown model '", name, "' (smollm2-135m, llama3.2-1b, llama3-8b)"));
  }
  c->name = name;
  RETURN_IF_ERROR(c->Validate());
  return c;
}

}  // namespace rtgen::tools
