// LoadTokenizerFromJson: a Hugging Face tokenizer.json (model.type "BPE": byte-level as GPT-2
// and Llama 3 use it, or SentencePiece-like with byte_fallback as Llama 2 uses it), plus the
// tokenizer_config.json beside it for bos/eos/add_bos when present.

#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/common/read_text_file.h"
#include "engine/common/json_nesting.h"
#include "engine/common/status_macros.h"
#include "engine/tokenizer/json_token_text.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab_tokenizer.h"
#include "nlohmann/json.hpp"

namespace rtgen {
namespace {

using Json = nlohmann::json;

absl::StatusOr<Json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJsonChecked(text, path));
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  return j;
}

// The pre-tokenizers/normalizers of a node: itself, or the members of a Sequence.
std::vector<Json> Parts(const Json& node, const char* list_key) {
  if (!node.is_object()) return {};
  if (node.value("type", "") == "Sequence" && node.contains(list_key)) {
    return node[list_key].get<std::vector<Json>>();
  }
  return {node};
}

// The Split regexes pre_tokenizer.cc implements, exactly as tokenizer.json writes them.
constexpr char kGpt2Regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr char kLlama3Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

absl::Status UnsupportedPreTokenizer(const Json& part, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("tokenizer.json pre_tokenizer ", part.dump(),
                                               ": ", why, " is not supported"));
}

// Which pre_tokenizer.cc splitter a byte-level pre-tokenizer is. Every member and option must be
// one rtgen implements (a look-alike regex or an ignored option would split text differently
// from Hugging Face without an error): Split with the GPT-2 or Llama 3 regex (Isolated, not
// inverted), ByteLevel without a prefix space (Hugging Face's default adds one), Digits with
// individual digits.
absl::StatusOr<PreTokenizerKind> ByteLevelPreTokenizer(const Json& pre) {
  bool digits = false, llama3 = false, byte_level_regex = false, gpt2_split = false;
  for (const Json& p : Parts(pre, "pretokenizers")) {
    const std::string type = p.value("type", "");
    if (type == "Digits") {
      if (!p.value("individual_digits", false)) {
        return UnsupportedPreTokenizer(p, "Digits without individual_digits");
      }
      digits = true;
    } else if (type == "ByteLevel") {
      if (p.value("add_prefix_space", true)) {
        return UnsupportedPreTokenizer(p, "ByteLevel add_prefix_space (absent means true)");
      }
      byte_level_regex |= p.value("use_regex", true);
    } else if (type == "Split") {
      const Json pattern = p.value("pattern", Json());
      const std::string regex = pattern.is_object() && pattern.contains("Regex")
                                    ? pattern["Regex"].get<std::string>()
                                    : "";
      if (p.value("behavior", "") != "Isolated" || p.value("invert", false)) {
        return UnsupportedPreTokenizer(p, "Split other than Isolated and not inverted");
      }
      if (regex == kLlama3Regex) {
        llama3 = true;
      } else if (regex == kGpt2Regex) {
        gpt2_split = true;
      } else {
        return UnsupportedPreTokenizer(p, "a Split pattern other than GPT-2's or Llama 3's");
      }
    } else {
      return UnsupportedPreTokenizer(p, absl::StrCat("type \"", type, "\""));
    }
  }
  if (llama3 && !digits && !gpt2_split && !byte_level_regex) return PreTokenizerKind::kLlama3;
  if ((byte_level_regex || gpt2_split) && !llama3) {
    return digits ? PreTokenizerKind::kGpt2IndividualDigits : PreTokenizerKind::kGpt2;
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer.json pre_tokenizer ", pre.dump(),
                                               " is not a supported byte-level "
                                               "pre-tokenizer"));
}

bool IsByteLevel(const Json& root) {
  for (const char* key : {"pre_tokenizer", "decoder"}) {
    if (!root.contains(key)) continue;
    for (const Json& p : Parts(root[key], key[0] == 'p' ? "pretokenizers" : "decoders")) {
      if (p.value("type", "") == "ByteLevel") return true;
    }
  }
  return false;
}

// SentencePiece space prefix from a Prepend("▁") normalizer or a Metaspace pre-tokenizer.
void SpacePrefix(const Json& root, VocabSpec* spec) {
  spec->add_space_prefix = false;
  for (const Json& n : Parts(root.value("normalizer", Json()), "normalizers")) {
    if (n.value("type", "") == "Prepend") spec->add_space_prefix = true;
  }
  for (const Json& p : Parts(root.value("pre_tokenizer", Json()), "pretokenizers")) {
    if (p.value("type", "") != "Metaspace") continue;
    const std::string scheme =
        p.value("prepend_scheme", p.value("add_prefix_space", true) ? "always" : "never");
    spec->add_space_prefix = scheme != "never";
    spec->space_prefix_first_only = scheme == "first";
    spec->metaspace = true;
    spec->metaspace_split = p.value("split", true);
  }
}

// The special token a TemplateProcessing post-processor (itself, or a member of a Sequence) puts
// first in a single sequence, or "": how Llama 3's tokenizer.json asks for its BOS when
// tokenizer_config.json has no add_bos_token.
std::string TemplateLeadingToken(const Json& post) {
  for (const Json& p : Parts(post, "processors")) {
    if (p.value("type", "") != "TemplateProcessing") continue;
    const Json single = p.value("single", Json::array());
    if (!single.is_array() || single.empty() || !single[0].is_object()) return "";
    const Json special = single[0].value("SpecialToken", Json());
    return special.is_object() ? JsonTokenText(special.value("id", Json())) : "";
  }
  return "";
}

// `max_id`: the largest id the file may give. Ids may leave holes, but no more holes than the
// file has entries (plus a little), so a file of a few bytes cannot size the vocabulary at
// millions of empty pieces.
absl::Status ParseModel(const Json& model, int64_t max_id, VocabSpec* spec) {
  if (model.value("type", "") != "BPE") {
    return absl::UnimplementedError(absl::StrCat(
        "tokenizer.json model.type \"", model.value("type", ""), "\" is not supported (BPE)"));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return absl::InvalidArgumentError("tokenizer.json model.vocab is missing or not an object");
  }
  for (const auto& [piece, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > max_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json model.vocab[\"", piece, "\"] = ", id.dump(),
                       " is not an id from 0 to ", max_id));
    }
    const auto i = id.get<size_t>();
    if (i >= spec->pieces.size()) spec->pieces.resize(i + 1);
    spec->pieces[i] = piece;
  }
  const Json merges = model.value("merges", Json::array());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    const std::string s = m.is_string() ? m.get<std::string>() : "";
    const size_t space = s.find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json model.merges[", i, "] is neither \"a b\" nor [a, b]"));
    }
    spec->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
  }
  return absl::OkStatus();
}

// LoadTokenizerFromJson's work; the JSON library throws on a member of an unexpected type
// (an id given as a string, a list given as an object), which its caller turns into an error.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadOrThrow(const std::string& path) {
  ASSIGN_OR_RETURN(const Json root, ReadJson(path));
  if (!root.is_object() || !root.contains("model")) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no \"model\""));
  }
  VocabSpec spec;
  const Json added_tokens = root.value("added_tokens", Json::array());
  const Json& vocab = root["model"].value("vocab", Json());
  const int64_t entries =
      static_cast<int64_t>((vocab.is_object() ? vocab.size() : 0) + added_tokens.size());
  const int64_t max_id = 2 * entries + 1024;
  RETURN_IF_ERROR(ParseModel(root["model"], max_id, &spec));
  spec.types.assign(spec.pieces.size(), TokenType::kNormal);
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const Json& added = added_tokens[i];
    const std::string field = absl::StrCat(path, ": added_tokens[", i, "]");
    // Members of the wrong type named here (the JSON library's own error names no member).
    if (!added.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is not an object"));
    }
    for (const auto& [member, is_type, type] :
         {std::tuple{"id", &Json::is_number_integer, "an integer"},
          {"content", &Json::is_string, "a string"},
          {"special", &Json::is_boolean, "true or false"}}) {
      if (added.contains(member) && !(added[member].*is_type)()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".", member, " = ", added[member].dump(), " is not ", type));
      }
    }
    const auto id = added.value("id", int64_t{-1});
    if (id < 0 || id > max_id) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".id ", id, " is not an id from 0 to ", max_id));
    }
    const std::string content = added.value("content", "");
    if (content.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".content is missing or empty"));
    }
    if (static_cast<size_t>(id) >= spec.pieces.size()) {
      spec.pieces.resize(id + 1);
      spec.types.resize(id + 1, TokenType::kNormal);
    }
    // An added token usually repeats its vocab entry; one that replaces another piece would
    // make that piece unreachable.
    if (!spec.pieces[id].empty() && spec.pieces[id] != content) {
      return absl::InvalidArgumentError(absl::StrCat(field, " \"", content, "\" takes id ", id,
                                                     " of vocab piece \"", spec.pieces[id],
                                                     "\""));
    }
    spec.pieces[id] = content;
    spec.types[id] = added.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
  }
  auto id_of = [&](const std::string& piece) -> std::optional<int32_t> {
    for (size_t i = 0; i < spec.pieces.size(); ++i) {
      if (!piece.empty() && spec.pieces[i] == piece) return static_cast<int32_t>(i);
    }
    return std::nullopt;
  };
  spec.unk_id = id_of(root["model"].value("unk_token", Json()).is_string()
                          ? root["model"]["unk_token"].get<std::string>()
                          : "");

  // tokenizer_config.json beside tokenizer.json.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  bool add_bos_given = false;
  if (auto config = ReadJson(dir + "/tokenizer_config.json"); config.ok() && config->is_object()) {
    // A named bos/eos token must be in the vocabulary: without it prompts would go out with no
    // BOS, or generation would not stop at the EOS, without a word.
    for (const auto& [key, id] :
         {std::pair{"bos_token", &spec.bos_id}, {"eos_token", &spec.eos_id}}) {
      const std::string text = JsonTokenText(config->value(key, Json()));
      *id = id_of(text);
      if (!text.empty() && !id->has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(dir, "/tokenizer_config.json: ", key,
                                                       " \"", text,
                                                       "\" is not in the vocabulary"));
      }
    }
    const Json add_bos = config->value("add_bos_token", Json());
    add_bos_given = add_bos.is_boolean();
    if (add_bos_given) spec.add_bos = add_bos.get<bool>();
  }
  // Else the post-processor's template decides, as in Hugging Face: a special token first in a
  // single sequence is the BOS added to raw prompts (Llama 3's <|begin_of_text|>).
  if (!add_bos_given) {
    const std::optional<int32_t> lead =
        id_of(TemplateLeadingToken(root.value("post_processor", Json())));
    if (lead.has_value() && (!spec.bos_id.has_value() || *spec.bos_id == *lead)) {
      spec.bos_id = lead;
      spec.add_bos = true;
    }
  }

  if (IsByteLevel(root)) {
    ASSIGN_OR_RETURN(spec.pre, ByteLevelPreTokenizer(root.value("pre_tokenizer", Json())));
    spec.ignore_merges = root["model"].value("ignore_merges", false);
    return CreateByteLevelBpeTokenizer(std::move(spec));
  }
  if (root["model"].value("byte_fallback", false)) {
    SpacePrefix(root, &spec);
    return CreateSpmTokenizer(std::move(spec));
  }
  return absl::UnimplementedError(
      absl::StrCat(path, ": a BPE model that is neither byte-level nor byte_fallback"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromJson(const std::string& path) {
  try {
    return LoadOrThrow(path);
  } catch (const Json::exception& e) {  // a malformed file is an error, never an abort
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

}  // namespace rtgen
