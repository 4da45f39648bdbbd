// LoadTokenizerFromGguf: the tokenizer.ggml.* metadata keys (as llama.cpp writes them).

#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab_tokenizer.h"

namespace rtgen {
namespace {

// Value of an optional key: nullopt when absent, an error when present with the wrong type.
template <typename T>
absl::StatusOr<std::optional<T>> Optional(absl::StatusOr<T> value) {
  if (value.ok()) return std::optional<T>(*std::move(value));
  if (absl::IsNotFound(value.status())) return std::optional<T>();
  return value.status();
}

absl::StatusOr<std::optional<int32_t>> OptionalId(const GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(std::optional<int64_t> id, Optional(file.GetInt(key)));
  if (!id) return std::optional<int32_t>();
  // Range-checked before narrowing: 4294967297 cut to 32 bits was id 1, which passed the
  // vocabulary check.
  if (*id < 0 || *id > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is ", *id, ", not a token id"));
  }
  return std::optional<int32_t>(static_cast<int32_t>(*id));
}

absl::StatusOr<PreTokenizerKind> PreTokenizerFor(const std::string& pre) {
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return PreTokenizerKind::kGpt2;
  if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    return PreTokenizerKind::kGpt2IndividualDigits;
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "smaug-bpe") {
    return PreTokenizerKind::kLlama3;
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.ggml.pre \"", pre, "\" is not a supported pre-tokenizer"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(const std::string model, file.GetString("tokenizer.ggml.model"));
  VocabSpec spec;
  ASSIGN_OR_RETURN(spec.pieces, file.GetStringArray("tokenizer.ggml.tokens"));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> types,
                   Optional(file.GetIntArray("tokenizer.ggml.token_type")));
  if (types) {
    for (int64_t t : *types) spec.types.push_back(static_cast<TokenType>(t));
  }
  ASSIGN_OR_RETURN(spec.bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(spec.eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(spec.unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id"));
  ASSIGN_OR_RETURN(std::optional<bool> add_bos,
                   Optional(file.GetBool("tokenizer.ggml.add_bos_token")));
  ASSIGN_OR_RETURN(std::optional<bool> add_space_prefix,
                   Optional(file.GetBool("tokenizer.ggml.add_space_prefix")));

  if (model == "gpt2") {
    spec.add_bos = add_bos.value_or(false);
    ASSIGN_OR_RETURN(std::optional<std::string> pre,
                     Optional(file.GetString("tokenizer.ggml.pre")));
    ASSIGN_OR_RETURN(spec.pre, PreTokenizerFor(pre.value_or("default")));
    spec.ignore_merges = spec.pre == PreTokenizerKind::kLlama3;  // as llama.cpp does
    ASSIGN_OR_RETURN(std::vector<std::string> merges, file.GetStringArray("tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t space = merges[i].find(' ', 1);
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer.ggml.merges[", i, "] \"", merges[i], "\" has no space"));
      }
      spec.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
    }
    return CreateByteLevelBpeTokenizer(std::move(spec));
  }
  if (model == "llama") {
    spec.add_bos = add_bos.value_or(true);
    spec.add_space_prefix = add_space_prefix.value_or(true);
    ASSIGN_OR_RETURN(std::vector<double> scores, file.GetFloatArray("tokenizer.ggml.scores"));
    for (size_t i = 0; i < scores.size(); ++i) {
      // NaN would make the merge queue's order inconsistent; past float's range, a cast is UB.
      ASSIGN_OR_RETURN(float score,
                       NarrowToFloat(scores[i], absl::StrCat("tokenizer.ggml.scores[", i, "]")));
      spec.scores.push_back(score);
    }
    return CreateSpmTokenizer(std::move(spec));
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.ggml.model \"", model, "\" is not supported (gpt2, llama)"));
}

}  // namespace rtgen
