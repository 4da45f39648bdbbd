#include "engine/loader/model_loader.h"

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/read_text_file.h"
#include "engine/common/json_nesting.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf_file.h"
#include "engine/tokenizer/json_token_text.h"
#include "nlohmann/json.hpp"

namespace rtgen {
namespace {

namespace fs = std::filesystem;

// The chat template is optional: a model without one (or with one we do not recognise) can still
// serve raw prompts; chat requests then fail with a clear error at the edge.
std::optional<ChatTemplate> ChatTemplateOrNone(const std::string& jinja, const std::string& bos) {
  if (jinja.empty()) return std::nullopt;
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromJinja(jinja, bos);
  if (!chat.ok()) {
    // Said once at load: a chat request then gets "no chat template", raw prompts still work.
    std::fprintf(stderr, "rtgen: the model's chat template is not used: %s\n",
                 std::string(chat.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(chat);
}

absl::StatusOr<LoadedModel> LoadGguf(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  LoadedModel model;
  model.path = path;
  ASSIGN_OR_RETURN(model.config, ModelConfig::FromGguf(*file));
  RETURN_IF_ERROR(model.config.Validate());
  ASSIGN_OR_RETURN(model.tokenizer, LoadTokenizerFromGguf(*file));
  if (model.tokenizer->vocab_size() != model.config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tokenizer has ", model.tokenizer->vocab_size(),
                     " tokens but the model's vocab_size is ", model.config.vocab_size));
  }
  ASSIGN_OR_RETURN(model.weights, LoadGgufWeights(*file, model.config));
  absl::StatusOr<std::string> jinja = file->GetString("tokenizer.chat_template");
  std::string bos;
  if (model.tokenizer->bos_id()) bos = model.tokenizer->TokenBytes(*model.tokenizer->bos_id());
  if (jinja.ok()) model.chat_template = ChatTemplateOrNone(*jinja, bos);
  return model;
}

// The ids of `json`'s eos_token_id: absent or null → none; an id or a list of ids.
absl::StatusOr<std::vector<int32_t>> EosTokenIds(const nlohmann::json& json,
                                                 const std::string& where) {
  std::vector<int32_t> ids;
  if (!json.is_object() || !json.contains("eos_token_id") || json["eos_token_id"].is_null()) {
    return ids;
  }
  const nlohmann::json& field = json["eos_token_id"];
  const nlohmann::json list = field.is_array() ? field : nlohmann::json::array({field});
  for (const nlohmann::json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": eos_token_id ", field.dump(), " is not an id or a list of ids"));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<LoadedModel> LoadHfDirectory(const fs::path& dir) {
  LoadedModel model;
  model.path = dir.string();
  ASSIGN_OR_RETURN(std::string config_json, ReadTextFile((dir / "config.json").string()));
  ASSIGN_OR_RETURN(model.config, ModelConfig::FromHfConfigJson(config_json));
  RETURN_IF_ERROR(model.config.Validate());
  const std::string tokenizer_json = (dir / "tokenizer.json").string();
  ASSIGN_OR_RETURN(model.tokenizer, LoadTokenizerFromJson(tokenizer_json));
  // The embedding has vocab_size rows; a tokenizer with more ids (added tokens past it) would
  // read past them. Fewer is common (vocab_size padded to a multiple of 64 or 128).
  if (model.tokenizer->vocab_size() > model.config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        tokenizer_json, ": token ids up to ", model.tokenizer->vocab_size() - 1,
        " but config.json's vocab_size is ", model.config.vocab_size));
  }
  RETURN_IF_ERROR(AddEosTokenIds(dir.string(), config_json, *model.tokenizer));
  if (fs::exists(dir / "chat_template.jinja")) {
    // Where recent transformers saves the template (tokenizer_config.json then has none).
    ASSIGN_OR_RETURN(std::string jinja, ReadTextFile((dir / "chat_template.jinja").string()));
    const std::optional<int32_t> bos = model.tokenizer->bos_id();
    model.chat_template = ChatTemplateOrNone(jinja, bos ? model.tokenizer->TokenBytes(*bos) : "");
  } else if (fs::exists(dir / "tokenizer_config.json")) {
    const std::string where = (dir / "tokenizer_config.json").string();
    ASSIGN_OR_RETURN(std::string text, ReadTextFile(where));
    ASSIGN_OR_RETURN(model.chat_template, ChatTemplateFromTokenizerConfig(text, where));
  }
  ASSIGN_OR_RETURN(model.weights, LoadSafetensorsWeights(dir.string(), model.config));
  // Rows past the tokenizer's ids (vocab_size padded to a multiple of 64 or 128) are no token:
  // without them no backend's sampler can pick one, and logits have the tokenizer's width.
  const int32_t ids = model.tokenizer->vocab_size();
  if (ids < model.config.vocab_size) {
    std::fprintf(stderr, "rtgen: %s: config.json's vocab_size %d is padded past the tokenizer's "
                 "%d ids; the embedding and LM head rows past them are dropped\n",
                 model.path.c_str(), model.config.vocab_size, ids);
    model.weights.KeepVocab(ids);
    model.config.vocab_size = ids;
    RETURN_IF_ERROR(model.weights.CheckShapes(model.config));
  }
  return model;
}

}  // namespace

absl::StatusOr<std::optional<ChatTemplate>> ChatTemplateFromTokenizerConfig(
    const std::string& json_text, const std::string& where) {
  ASSIGN_OR_RETURN(const nlohmann::json cfg, ParseJsonChecked(json_text, where));
  if (cfg.is_discarded() || !cfg.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  }
  const std::string bos = JsonTokenText(cfg.value("bos_token", nlohmann::json()));
  auto it = cfg.find("chat_template");
  if (it == cfg.end()) return std::optional<ChatTemplate>();
  if (it->is_string()) return ChatTemplateOrNone(it->get<std::string>(), bos);
  // A list of named templates (tool-use variants beside it): the one named "default".
  if (it->is_array()) {
    for (const nlohmann::json& entry : *it) {
      if (entry.is_object() && entry.value("name", nlohmann::json()) == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return ChatTemplateOrNone(entry["template"].get<std::string>(), bos);
      }
    }
  }
  std::fprintf(stderr, "rtgen: %s's chat_template is neither a string nor a list with a "
               "\"default\" entry: not used\n", where.c_str());
  return std::optional<ChatTemplate>();
}

absl::Status AddEosTokenIds(const std::string& dir, const std::string& config_json,
                            Tokenizer& tokenizer) {
  const fs::path config_path = fs::path(dir) / "config.json";
  const fs::path generation_path = fs::path(dir) / "generation_config.json";
  std::vector<std::pair<std::string, std::string>> files = {
      {config_path.string(), config_json}};
  if (fs::exists(generation_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadTextFile(generation_path.string()));
    files.emplace_back(generation_path.string(), std::move(text));
  }
  for (const auto& [where, text] : files) {
    ASSIGN_OR_RETURN(const nlohmann::json json, ParseJsonChecked(text, where));
    if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(where, ": not JSON"));
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, EosTokenIds(json, where));
    if (absl::Status s = tokenizer.AddStopIds(ids); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": eos_token_id: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return LoadHfDirectory(path);
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat("model not found: ", path));
  return LoadGguf(path);
}

}  // namespace rtgen
