// Tokenizer files that disagree with themselves are refused naming the field, not loaded into a
// tokenizer that encodes differently from Hugging Face or llama.cpp: merges of pieces that are no
// tokens, scores that are not finite floats, vocab ids far past the file's entries, added tokens
// that take another piece's id or have no content, a bos/eos token missing from the vocabulary,
// a BOS to add with no BOS token; and byte pieces are read only in SentencePiece's exact form.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unique_temp_path.h"

namespace rtgen {
namespace {

using Json = nlohmann::json;

// A byte-level BPE tokenizer.json over "a" "b" "ab" with `merges`, in a directory of its own
// (with `config`, when given, as its tokenizer_config.json).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadJson(Json merges, Json added = Json::array(),
                                                    Json vocab = nullptr, Json config = nullptr) {
  if (vocab.is_null()) vocab = {{"a", 0}, {"b", 1}, {"ab", 2}};
  const Json root = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"added_tokens", added}};
  const std::string dir = testing::UniqueTempPath("tokenizer_checks");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << root.dump();
  if (!config.is_null()) std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  auto loaded = LoadTokenizerFromJson(dir + "/tokenizer.json");
  std::filesystem::remove_all(dir);
  return loaded;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGguf(const GgufWriter& w) {
  const std::string path = testing::UniqueTempPath("tokenizer_checks.gguf");
  if (absl::Status s = w.WriteFile(path); !s.ok()) return s;
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return LoadTokenizerFromGguf(**file);
}

// A SentencePiece (llama) vocabulary: <unk> <s> </s> ▁ and `extra`, scores 0.
GgufWriter SpmGguf(const std::vector<std::string>& extra, std::vector<float> scores = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81"};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  std::vector<int32_t> types = {2, 3, 3};
  types.resize(tokens.size(), 1);
  scores.resize(tokens.size(), 0.0f);
  GgufWriter w;
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", scores);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  return w;
}

void ExpectRefused(const absl::StatusOr<std::unique_ptr<Tokenizer>>& tok,
                   const std::string& error) {
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
  EXPECT_TRUE(absl::StrContains(tok.status().message(), error)) << tok.status();
}

TEST(TokenizerFileChecksTest, MergesOfPiecesThatAreNoTokensAreRefused) {
  EXPECT_TRUE(LoadJson({"a b"}).ok());
  ExpectRefused(LoadJson({"a b", "a c"}), "merges[1] \"a c\": \"c\" is not a token");
  ExpectRefused(LoadJson({"b a"}), "merges[0] \"b a\": \"ba\" is not a token");
  GgufWriter w;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.AddStringArray("tokenizer.ggml.merges", {"a b", "\xC4\xA0 t"});  // "Ġ t": no "Ġ", no "Ġt"
  ExpectRefused(LoadGguf(w), "merges[1]");
}

TEST(TokenizerFileChecksTest, ScoresMustBeFiniteFloats) {
  GgufWriter good = SpmGguf({"a"});
  good.AddUint32("tokenizer.ggml.bos_token_id", 1);
  EXPECT_TRUE(LoadGguf(good).ok());
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    GgufWriter w = SpmGguf({"a"}, {0, 0, 0, 0, bad});
    w.AddUint32("tokenizer.ggml.bos_token_id", 1);
    ExpectRefused(LoadGguf(w), "tokenizer.ggml.scores[4]");
  }
}

TEST(TokenizerFileChecksTest, VocabIdsFarPastTheFilesEntriesAreRefused) {
  // Three entries cannot name id 16777216: 16.7 million empty pieces for a file of 60 bytes.
  ExpectRefused(LoadJson(Json::array(), Json::array(), {{"a", 16777216}}),
                "model.vocab[\"a\"] = 16777216 is not an id from 0 to");
  // A hole of a few ids is a file's own business.
  EXPECT_TRUE(LoadJson(Json::array(), Json::array(), {{"a", 0}, {"b", 5}}).ok());
}

TEST(TokenizerFileChecksTest, AddedTokensMustHaveContentAndTheirOwnId) {
  // Repeating a vocab entry is how tokenizer.json lists special tokens that are in the vocab.
  EXPECT_TRUE(LoadJson({"a b"}, Json::array({{{"id", 2}, {"content", "ab"}}})).ok());
  ExpectRefused(LoadJson({"a b"}, Json::array({{{"id", 2}, {"content", "<x>"}}})),
                "added_tokens[0] \"<x>\" takes id 2 of vocab piece \"ab\"");
  ExpectRefused(LoadJson({"a b"}, Json::array({{{"id", 3}}})),
                "added_tokens[0].content is missing or empty");
  ExpectRefused(LoadJson({"a b"}, Json::array({{{"id", -4}, {"content", "<x>"}}})),
                "added_tokens[0].id -4 is not an id");
}

TEST(TokenizerFileChecksTest, ABosOrEosTokenMissingFromTheVocabularyIsRefused) {
  const Json added = Json::array({{{"id", 3}, {"content", "<s>"}, {"special", true}}});
  EXPECT_TRUE(LoadJson({"a b"}, added, nullptr, {{"bos_token", "<s>"}}).ok());
  ExpectRefused(LoadJson({"a b"}, added, nullptr, {{"bos_token", "<bos>"}}),
                "bos_token \"<bos>\" is not in the vocabulary");
  ExpectRefused(LoadJson({"a b"}, added, nullptr, {{"eos_token", "</s>"}}),
                "eos_token \"</s>\" is not in the vocabulary");
  // A BOS to add with none named: GGUF's llama tokenizer adds one unless told otherwise.
  ExpectRefused(LoadGguf(SpmGguf({"a"})), "add_bos_token is true but the tokenizer names no BOS");
  GgufWriter no_bos = SpmGguf({"a"});
  no_bos.AddBool("tokenizer.ggml.add_bos_token", false);
  EXPECT_TRUE(LoadGguf(no_bos).ok());
}

TEST(TokenizerFileChecksTest, BytePiecesAreReadOnlyInSentencePiecesForm) {
  GgufWriter w = SpmGguf({"<0x0A>", "<0x+A>", "<0x-1>", "<0x0a>"});
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  auto tok = LoadGguf(w);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->TokenBytes(4), "\n");
  EXPECT_EQ((*tok)->TokenBytes(5), "<0x+A>");
  EXPECT_EQ((*tok)->TokenBytes(6), "<0x-1>");
  EXPECT_EQ((*tok)->TokenBytes(7), "<0x0a>");
}

}  // namespace
}  // namespace rtgen
