// A Hugging Face model directory's tokenizer side (engine/loader/model_loader.h): a
// tokenizer.json with ids past config.json's vocab_size is refused before any weight is read
// (its added tokens would have read past the embedding); tokenizer_config.json's bos_token as an
// object (Llama 2's) still starts each turn; a Llama 3.1+ template is refused, not rendered as
// Llama 3.0's; a tokenizer.json with a member of the wrong type is an error, not an abort; a
// post-processor template's leading special token is the BOS when tokenizer_config.json is silent;
// config.json's vocab_size padded past the tokenizer's ids keeps only the tokenizer's rows.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "engine/loader/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/model/safetensors_builder.h"
#include "tests/unique_temp_path.h"

namespace rtgen {
namespace {

// config.json of a tiny Llama with `vocab` rows.
std::string TinyConfigJson(int vocab) {
  return nlohmann::json{{"model_type", "llama"},         {"hidden_size", 64},
                        {"intermediate_size", 128},      {"num_hidden_layers", 1},
                        {"num_attention_heads", 4},      {"max_position_embeddings", 64},
                        {"vocab_size", vocab}}
      .dump();
}

// A byte-level BPE tokenizer.json: "a" "b" "ab", then the added tokens at `added_ids`.
std::string TinyTokenizerJson(const std::vector<int>& added_ids) {
  nlohmann::json added = nlohmann::json::array();
  for (int id : added_ids) {
    added.push_back({{"id", id}, {"content", "<x" + std::to_string(id) + ">"}, {"special", true}});
  }
  return nlohmann::json{
      {"model",
       {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"added_tokens", added}}
      .dump();
}

std::string WriteHfDirectory(int vocab, const std::vector<int>& added_ids) {
  const std::string dir = testing::UniqueTempPath("hf_dir");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << TinyConfigJson(vocab);
  std::ofstream(dir + "/tokenizer.json") << TinyTokenizerJson(added_ids);
  return dir;
}

TEST(HfDirectoryLoaderTest, TokenizerIdsPastTheVocabSizeAreRefused) {
  const auto past = LoadModel(WriteHfDirectory(8, {3, 8}));  // id 8 of a vocab of 8
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument) << past.status();
  EXPECT_TRUE(absl::StrContains(past.status().message(),
                                "token ids up to 8 but config.json's vocab_size is 8"))
      << past.status();
  // Within the vocabulary (fewer ids than rows is common): the load goes on to the weights,
  // which this directory has none of.
  const auto within = LoadModel(WriteHfDirectory(8, {3, 7}));
  EXPECT_FALSE(within.ok());
  EXPECT_FALSE(absl::StrContains(within.status().message(), "vocab_size")) << within.status();
}

// Every tensor of TinyConfigJson(vocab) as F32 into dir/model.safetensors: norms of ones, each
// matrix's element j = its index among the matrices + j / 65536 (every value distinct).
void WriteTinyWeights(const std::string& dir, int vocab) {
  testing::SafetensorsBuilder b;
  int index = 0;
  const auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(index) + j / 65536.0f;
    ++index;
    b.Add(name, "F32", {rows, cols}, v);
  };
  const auto norm = [&](const std::string& name) {
    b.Add(name, "F32", {64}, std::vector<float>(64, 1.0f));
  };
  matrix("model.embed_tokens.weight", vocab, 64);
  matrix("lm_head.weight", vocab, 64);
  norm("model.norm.weight");
  const std::string p = "model.layers.0.";
  norm(p + "input_layernorm.weight");
  norm(p + "post_attention_layernorm.weight");
  for (const char* w : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    matrix(p + "self_attn." + w + ".weight", 64, 64);
  }
  matrix(p + "mlp.gate_proj.weight", 128, 64);
  matrix(p + "mlp.up_proj.weight", 128, 64);
  matrix(p + "mlp.down_proj.weight", 64, 128);
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << b.Bytes();
}

TEST(HfDirectoryLoaderTest, RowsPaddedPastTheTokenizersIdsAreDropped) {
  // 8 rows, the tokenizer's ids 0-4 ("a" "b" "ab", <x3>, <x4>): rows 5-7 are padding, which no
  // sampler may pick and no logits row may carry.
  const std::string dir = WriteHfDirectory(8, {3, 4});
  WriteTinyWeights(dir, 8);
  const auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->tokenizer->vocab_size(), 5);
  EXPECT_EQ(model->config.vocab_size, 5);
  for (const Matrix* m : {&model->weights.token_embedding, &model->weights.lm_head}) {
    EXPECT_EQ(m->rows, 5);
    EXPECT_EQ(m->cols, 64);
    ASSERT_EQ(m->data.size(), 5u * 64u);
    EXPECT_EQ(m->data[4 * 64 + 63], m->data[0] + (4 * 64 + 63) / 65536.0f);  // rows 0-4 kept
  }
  EXPECT_TRUE(model->weights.CheckShapes(model->config).ok());
}

TEST(HfDirectoryLoaderTest, MembersOfTheWrongTypeAreAnErrorNotAnAbort) {
  const nlohmann::json good = nlohmann::json::parse(TinyTokenizerJson({3}));
  std::vector<nlohmann::json> bad(4, good);
  bad[0]["added_tokens"][0]["id"] = "3";                                 // an id as a string
  bad[1]["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{"a", 1}}}};  // an object
  bad[2]["model"]["ignore_merges"] = "yes";                              // a flag as a string
  bad[3]["added_tokens"][0]["special"] = 1;                              // a flag as a number
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const std::string dir = testing::UniqueTempPath("bad_tokenizer");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/tokenizer.json") << bad[i].dump();
    const auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
    EXPECT_TRUE(absl::StrContains(tok.status().message(), "tokenizer.json")) << tok.status();
  }
  // An added token's members are named with their entry.
  const std::tuple<const char*, nlohmann::json, const char*> members[] = {
      {"id", "3", "added_tokens[0].id = \"3\" is not an integer"},
      {"content", 7, "added_tokens[0].content = 7 is not a string"},
      {"special", 1, "added_tokens[0].special = 1 is not true or false"}};
  for (const auto& [member, value, error] : members) {
    nlohmann::json json = good;
    json["added_tokens"][0][member] = value;
    const std::string dir = testing::UniqueTempPath("bad_added_token");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/tokenizer.json") << json.dump();
    const auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
    EXPECT_TRUE(absl::StrContains(tok.status().message(), error)) << tok.status();
  }
  const std::string dir = testing::UniqueTempPath("good_tokenizer");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << good.dump();
  EXPECT_TRUE(LoadTokenizerFromJson(dir + "/tokenizer.json").ok());
}

// A byte-level pre-tokenizer rtgen does not implement exactly is refused naming what differs,
// not split like a look-alike: a ByteLevel prefix space (Hugging Face's default when absent), a
// Split pattern other than GPT-2's or Llama 3's (GPT-4o's o200k below contains Llama 3's
// \p{N}{1,3}), Split behaviours, Digits without individual digits, other pre-tokenizer types.
TEST(HfDirectoryLoaderTest, PreTokenizersNotImplementedExactlyAreRefused) {
  using Json = nlohmann::json;
  const Json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                           {"use_regex", false}};
  const std::string llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const std::string o200k =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
      "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  auto split = [](const std::string& regex, const std::string& behavior) {
    return Json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior},
                {"invert", false}};
  };
  auto sequence = [](std::vector<Json> parts) {
    return Json{{"type", "Sequence"}, {"pretokenizers", parts}};
  };
  struct Case {
    Json pre;
    std::string error;
  } cases[] = {
      {{{"type", "ByteLevel"}, {"add_prefix_space", true}}, "ByteLevel add_prefix_space"},
      {{{"type", "ByteLevel"}}, "ByteLevel add_prefix_space (absent means true)"},
      {sequence({split(o200k, "Isolated"), byte_level}), "a Split pattern other than"},
      {sequence({split(llama3, "Removed"), byte_level}), "Split other than Isolated"},
      {sequence({{{"type", "Digits"}, {"individual_digits", false}},
                 {{"type", "ByteLevel"}, {"add_prefix_space", false}}}),
       "Digits without individual_digits"},
      {sequence({{{"type", "Whitespace"}}, byte_level}), "type \"Whitespace\""},
  };
  for (const Case& c : cases) {
    Json json = Json::parse(TinyTokenizerJson({3}));
    json["pre_tokenizer"] = c.pre;
    const std::string dir = testing::UniqueTempPath("pre_tokenizer");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/tokenizer.json") << json.dump();
    const auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented) << c.pre.dump();
    EXPECT_TRUE(absl::StrContains(tok.status().message(), c.error)) << tok.status();
  }
  // Llama 3's pipeline as its tokenizer.json writes it loads.
  Json json = Json::parse(TinyTokenizerJson({3}));
  json["pre_tokenizer"] = sequence({split(llama3, "Isolated"), byte_level});
  const std::string dir = testing::UniqueTempPath("pre_tokenizer");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << json.dump();
  EXPECT_TRUE(LoadTokenizerFromJson(dir + "/tokenizer.json").ok());
}

// config.json's and generation_config.json's eos_token_id (an id or a list) are stop ids, as
// transformers stops on each: Llama 3 Instruct lists <|end_of_text|>, <|eom_id|>, <|eot_id|>.
TEST(HfDirectoryLoaderTest, EosTokenIdsOfTheConfigsAreStopIds) {
  const std::string dir = testing::UniqueTempPath("eos_ids");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << TinyTokenizerJson({3});
  auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<int32_t> before = (*tok)->stop_ids();
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": [1, 3]})";
  ASSERT_TRUE(AddEosTokenIds(dir, R"({"eos_token_id": 2})", **tok).ok());
  for (int32_t id : {1, 2, 3}) {
    EXPECT_NE(std::find((*tok)->stop_ids().begin(), (*tok)->stop_ids().end(), id),
              (*tok)->stop_ids().end())
        << id;
  }
  EXPECT_EQ((*tok)->stop_ids().size(), before.size() + 3);
  // Ids outside the vocabulary, or not ids, are refused naming the file.
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": [1, 9]})";
  absl::Status s = AddEosTokenIds(dir, "{}", **tok);
  EXPECT_TRUE(absl::StrContains(s.message(), "generation_config.json: eos_token_id: stop token "
                                             "id 9 is outside the vocabulary"))
      << s;
  s = AddEosTokenIds(dir, R"({"eos_token_id": "</s>"})", **tok);
  EXPECT_TRUE(absl::StrContains(s.message(), "config.json: eos_token_id \"</s>\" is not an id"))
      << s;
}

// JSON nested 100,000 levels deep where the loaders copy or print a value (eos_token_id in
// generation_config.json, bos_token in tokenizer_config.json, a tokenizer.json member) crashed
// the loader with a stack overflow: each file is refused, naming it.
TEST(HfDirectoryLoaderTest, JsonNestedTooDeepIsRefusedNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string dir = testing::UniqueTempPath("deep_json");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << TinyTokenizerJson({3});
  auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": )" + deep + "}";
  absl::Status s = AddEosTokenIds(dir, "{}", **tok);
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "generation_config.json: JSON nested deeper than 64 levels"))
      << s;
  auto chat = ChatTemplateFromTokenizerConfig(R"({"bos_token": )" + deep + "}",
                                              "tokenizer_config.json");
  EXPECT_TRUE(absl::StrContains(chat.status().message(),
                                "tokenizer_config.json: JSON nested deeper than 64 levels"))
      << chat.status();
  std::string text = nlohmann::json::parse(TinyTokenizerJson({3})).dump();
  text.insert(text.size() - 1, R"(, "extra": )" + deep);
  std::ofstream(dir + "/tokenizer.json", std::ios::trunc) << text;
  auto deep_tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  EXPECT_TRUE(absl::StrContains(deep_tok.status().message(), "JSON nested deeper than 64"))
      << deep_tok.status();
}

TEST(HfDirectoryLoaderTest, APostProcessorsLeadingSpecialTokenIsTheBosWhenConfigIsSilent) {
  // Llama 3's tokenizer.json: TemplateProcessing puts <|begin_of_text|> first (here inside a
  // Sequence, as Llama 3.1+ writes it); tokenizer_config.json has no add_bos_token.
  nlohmann::json json = nlohmann::json::parse(TinyTokenizerJson({3}));
  json["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<x3>", "type_id": 0}},
                                                {"Sequence": {"id": "A", "type_id": 0}}]}]})");
  const std::string dir = testing::UniqueTempPath("llama3_bos");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << json.dump();
  auto tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 3);
  // tokenizer_config.json's add_bos_token, when given, still decides.
  std::ofstream(dir + "/tokenizer_config.json") << R"({"add_bos_token": false})";
  tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->add_bos());
  // A template that starts with the sequence adds nothing.
  json["post_processor"] = nlohmann::json::parse(
      R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}]})");
  std::filesystem::remove(dir + "/tokenizer_config.json");
  std::ofstream(dir + "/tokenizer.json") << json.dump();
  tok = LoadTokenizerFromJson(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->add_bos());
}

TEST(HfDirectoryLoaderTest, BosTokenAsAnObjectStartsEachLlama2Turn) {
  const std::string llama2 =
      "{% for m in messages %}{{ bos_token + '[INST] ' + m['content'] + ' [/INST]' }}"
      "{% endfor %}{# <<SYS>> #}";
  for (const nlohmann::json& bos : {nlohmann::json("<s>"),
                                     nlohmann::json{{"content", "<s>"}, {"lstrip", false}}}) {
    const nlohmann::json cfg = {{"bos_token", bos}, {"chat_template", llama2}};
    auto t = ChatTemplateFromTokenizerConfig(cfg.dump(), "tokenizer_config.json");
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(t->has_value()) << bos.dump();
    const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
    auto text = (*t)->Render(msgs, true);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "<s>[INST] Hi [/INST]") << bos.dump();
  }
  EXPECT_FALSE(ChatTemplateFromTokenizerConfig("[1]", "tokenizer_config.json").ok());
}

// A list of named templates (tool-use variants beside the default): the "default" entry.
TEST(HfDirectoryLoaderTest, AListOfTemplatesGivesItsDefault) {
  const std::string llama3 = "{{ '<|start_header_id|>' + m['role'] }}";
  const nlohmann::json cfg = {
      {"chat_template", nlohmann::json::array({{{"name", "tool_use"}, {"template", "{{ x }}"}},
                                               {{"name", "default"}, {"template", llama3}}})}};
  auto t = ChatTemplateFromTokenizerConfig(cfg.dump(), "tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->has_value());
  const nlohmann::json no_default = {
      {"chat_template", nlohmann::json::array({{{"name", "tool_use"}, {"template", llama3}}})}};
  auto none = ChatTemplateFromTokenizerConfig(no_default.dump(), "tokenizer_config.json");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

// A whole tiny directory (one layer, F32 weights of TinyConfigJson's shapes) whose template is in
// chat_template.jinja, where recent transformers saves it.
TEST(HfDirectoryLoaderTest, ChatTemplateJinjaIsTheTemplate) {
  const std::string dir = WriteHfDirectory(4, {3});
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<float> values(static_cast<size_t>(n), 0.01f);
    header[name] = {{"dtype", "F32"},
                    {"shape", shape},
                    {"data_offsets", {data.size(), data.size() + values.size() * 4}}};
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  };
  add("model.embed_tokens.weight", {4, 64});
  add("lm_head.weight", {4, 64});
  add("model.norm.weight", {64});
  const std::string p = "model.layers.0.";
  add(p + "input_layernorm.weight", {64});
  add(p + "post_attention_layernorm.weight", {64});
  for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    add(p + "self_attn." + m + ".weight", {64, 64});
  }
  add(p + "mlp.gate_proj.weight", {128, 64});
  add(p + "mlp.up_proj.weight", {128, 64});
  add(p + "mlp.down_proj.weight", {64, 128});
  const std::string h = header.dump();
  const uint64_t len = h.size();
  std::ofstream(dir + "/model.safetensors", std::ios::binary)
      << std::string(reinterpret_cast<const char*>(&len), 8) << h << data;
  auto without = LoadModel(dir);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->chat_template.has_value());
  std::ofstream(dir + "/chat_template.jinja") << "{{ '<|start_header_id|>' + m['role'] }}";
  auto with = LoadModel(dir);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(with->chat_template.has_value());
}

TEST(HfDirectoryLoaderTest, Llama31TemplatesAreRefusedNotRenderedAsLlama30) {
  const std::string llama31 =
      "{{- bos_token }}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
      "{{- 'Cutting Knowledge Date: December 2023\\n' }}{{- 'Today Date: ' + date_string }}";
  auto t = ChatTemplate::FromJinja(llama31, "<|begin_of_text|>");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
  // In a directory's tokenizer_config.json: no template (chat requests are then refused at the
  // edge, raw prompts still served).
  const nlohmann::json cfg = {{"bos_token", "<|begin_of_text|>"}, {"chat_template", llama31}};
  auto none = ChatTemplateFromTokenizerConfig(cfg.dump(), "tokenizer_config.json");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  // Llama 3.0's template stays supported.
  EXPECT_TRUE(ChatTemplate::FromJinja("{{ '<|start_header_id|>' + m['role'] }}", "").ok());
}

}  // namespace
}  // namespace rtgen
