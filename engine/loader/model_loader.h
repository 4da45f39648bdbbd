#pragma once
// Loads a whole model: config, fp32 weights, tokenizer and chat template, from either a GGUF file
// or a Hugging Face directory (config.json + *.safetensors + tokenizer.json
// [+ tokenizer_config.json for the chat template]).

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {

struct LoadedModel {
  std::string path;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent when the model has none we recognise
};

absl::StatusOr<LoadedModel> LoadModel(const std::string& path);

// Adds to `tokenizer`'s stop ids the eos_token_id (an id or a list) of a Hugging Face
// directory's config.json and generation_config.json (`config_json` is config.json's text; the
// latter is read when present), as transformers stops on each of them: Llama 3 Instruct lists
// three. Errors name the file and the field.
absl::Status AddEosTokenIds(const std::string& dir, const std::string& config_json,
                            Tokenizer& tokenizer);

// The chat template of a Hugging Face directory's tokenizer_config.json (its text; `where` names
// the file in errors): a string, or the "default" entry of a list of named templates; nullopt
// when it has none we recognise. (A directory's chat_template.jinja, where recent transformers
// saves it, is taken before this file.) Its bos_token may be a string or
// an object with "content" (Llama 2's), as tokenizer.json's added tokens are.
absl::StatusOr<std::optional<ChatTemplate>> ChatTemplateFromTokenizerConfig(
    const std::string& json_text, const std::string& where);

}  // namespace rtgen
