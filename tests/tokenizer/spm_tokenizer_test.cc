// SentencePiece-style BPE on a small hand-built Llama-2-like vocabulary, loaded through GGUF
// (GgufWriter → LoadTokenizerFromGguf) and through a tokenizer.json.

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unique_temp_path.h"

namespace rtgen {
namespace {

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void Add(const std::string& piece, float score, int32_t type = 1) {
    tokens.push_back(piece);
    scores.push_back(score);
    types.push_back(type);
  }
};

// <unk> <s> </s>, the 256 byte tokens, then pieces whose scores order the merges:
// ll > he > ▁he > llo > ▁hello > or > ▁w > ▁wor > ld.
Vocab SmallVocab() {
  Vocab v;
  v.Add("<unk>", 0, 2);
  v.Add("<s>", 0, 3);
  v.Add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.Add(name, 0, 6);
  }
  for (const char* c : {"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d"}) v.Add(c, -100);
  const std::vector<std::pair<std::string, float>> merged = {{"ll", -1},
                                                             {"he", -2},
                                                             {"\xE2\x96\x81he", -3},
                                                             {"llo", -4},
                                                             {"\xE2\x96\x81hello", -5},
                                                             {"or", -6},
                                                             {"\xE2\x96\x81w", -7},
                                                             {"\xE2\x96\x81wor", -8},
                                                             {"ld", -9}};
  for (const auto& [piece, score] : merged) v.Add(piece, score);
  return v;
}

// A vocabulary's tokenizer.ggml.* keys, without the special token ids.
GgufWriter VocabGguf(const Vocab& v) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", v.scores);
  w.AddInt32Array("tokenizer.ggml.token_type", v.types);
  return w;
}

GgufWriter SmallVocabGguf() { return VocabGguf(SmallVocab()); }

std::unique_ptr<Tokenizer> LoadViaGguf(bool add_space_prefix) {
  GgufWriter w = SmallVocabGguf();
  w.AddUint32("tokenizer.ggml.unknown_token_id", 0);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  w.AddBool("tokenizer.ggml.add_space_prefix", add_space_prefix);
  const std::string path = testing::UniqueTempPath("spm_vocab.gguf");
  EXPECT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tok = LoadTokenizerFromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<std::string> PiecesOf(const Tokenizer& tok, const std::string& text, bool special) {
  auto ids = tok.Encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  std::vector<std::string> out;
  const Vocab v = SmallVocab();
  for (int32_t id : ids.value_or(std::vector<int32_t>{})) out.push_back(v.tokens[id]);
  return out;
}

using V = std::vector<std::string>;

TEST(SpmTokenizerTest, MergesByScoreWithSpacePrefix) {
  auto tok = LoadViaGguf(/*add_space_prefix=*/true);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(PiecesOf(*tok, "hello world", false),
            (V{"\xE2\x96\x81hello", "\xE2\x96\x81wor", "ld"}));
  EXPECT_TRUE(tok->add_bos());  // Llama default
  EXPECT_EQ(tok->bos_id(), std::optional<int32_t>(1));
  EXPECT_EQ(tok->stop_ids(), (std::vector<int32_t>{2}));
}

TEST(SpmTokenizerTest, UnknownTokenTextIsTheUnknownTokenWhereSpecialTokensAreParsed) {
  // A GGUF marks SentencePiece's <unk> UNKNOWN (2), not CONTROL: it was left out of the special
  // pieces, so "<unk>" in a prompt became bytes while the same model's tokenizer.json gave the
  // unknown token (llama.cpp parses UNKNOWN-type tokens as special too).
  auto tok = LoadViaGguf(/*add_space_prefix=*/true);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(PiecesOf(*tok, "hello<unk>", true), (V{"\xE2\x96\x81hello", "<unk>"}));
  const V plain = PiecesOf(*tok, "hello<unk>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "<unk>"), 0) << "parsed without special";
  EXPECT_EQ(plain.front(), "\xE2\x96\x81hello");
}

// A Metaspace tokenizer.json (Hugging Face's pre-tokenizer, prepend_scheme "always") over
// "▁" "a" "▁▁" "▁a" with merges "▁ ▁" then "▁ a"; `split` as given.
std::unique_ptr<Tokenizer> MetaspaceTokenizer(bool split) {
  const std::string sp = "\xE2\x96\x81";
  nlohmann::json root = {
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"vocab", {{sp, 0}, {"a", 1}, {sp + sp, 2}, {sp + "a", 3}}},
        {"merges", {sp + " " + sp, sp + " a"}}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "always"},
        {"split", split}}},
  };
  const std::string path = testing::UniqueTempPath("metaspace_tokenizer.json");
  std::ofstream(path) << root.dump();
  auto tok = LoadTokenizerFromJson(path);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SpmTokenizerTest, MetaspacePrependsOnlyWhereNoSpaceMarkAndSplitsBeforeEach) {
  // As Hugging Face tokenizers' Metaspace: no second "▁" before text that starts with a space,
  // and with split the text is cut before every "▁" (so "▁▁" never merges across a cut).
  auto whole = MetaspaceTokenizer(false);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->Encode(" a", false).value(), (std::vector<int32_t>{3}));  // was [2, 1]
  EXPECT_EQ(whole->Encode("a", false).value(), (std::vector<int32_t>{3}));
  auto split = MetaspaceTokenizer(true);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->Encode("a  a", false).value(), (std::vector<int32_t>{3, 0, 3}));  // [3, 2, 1]
  EXPECT_EQ(split->Encode(" a", false).value(), (std::vector<int32_t>{3}));
}

TEST(SpmTokenizerTest, TokenIdsPastInt32AreRefusedNotTruncated) {
  // 4294967297 (2^32 + 1) stored as uint64 was cut to id 1, which passed the vocabulary check.
  GgufWriter w = SmallVocabGguf();
  w.AddUint64("tokenizer.ggml.bos_token_id", 4294967297ull);
  const std::string path = testing::UniqueTempPath("spm_big_id.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = LoadTokenizerFromGguf(**file);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
  EXPECT_NE(std::string(tok.status().message()).find("tokenizer.ggml.bos_token_id"),
            std::string::npos)
      << tok.status();
}

TEST(SpmTokenizerTest, UnknownCharactersFallBackToBytes) {
  auto tok = LoadViaGguf(true);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(PiecesOf(*tok, "h\xC3\xA9", false), (V{"\xE2\x96\x81", "h", "<0xC3>", "<0xA9>"}));
  auto ids = tok->Encode("h\xC3\xA9 hello", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(tok->Decode(*ids), "h\xC3\xA9 hello");  // leading "▁" space dropped
  IncrementalDetokenizer detok(tok.get());
  std::string streamed;
  for (int32_t id : *ids) streamed += detok.Push(id);
  EXPECT_EQ(streamed + detok.Flush(), "h\xC3\xA9 hello");
}

// The space a SentencePiece "▁" puts before the text's first token is dropped once, by the token
// that starts the text: a bare "▁" first (its text empty after the drop) leaves the "▁hello"
// after it its space, as Decode does (both were stripped); and a stream after a prompt with text
// keeps its first token's space, as Hugging Face decodes prompt and output together ("is" +
// "▁Paris" is " Paris"), while one after special tokens only (BOS) starts the text where they
// are skipped (the default), and does not where they are kept ("<s>" + "▁hello" is
// "<s> hello"); a skipped special token pushed first leaves the text unstarted.
TEST(SpmTokenizerTest, TheLeadingSpaceIsDroppedOnlyWhereTheTextStarts) {
  auto tok = LoadViaGguf(true);
  ASSERT_NE(tok, nullptr);
  const std::optional<int32_t> bare = tok->TokenId("\xE2\x96\x81");
  const std::optional<int32_t> hello = tok->TokenId("\xE2\x96\x81hello");
  ASSERT_TRUE(bare && hello);
  const auto stream = [&](std::span<const int32_t> context, std::vector<int32_t> ids,
                          bool skip_special = true) {
    IncrementalDetokenizer detok(tok.get(), context, skip_special);
    std::string text;
    for (int32_t id : ids) text += detok.Push(id);
    return text + detok.Flush();
  };
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{*bare, *hello}), " hello");
  EXPECT_EQ(stream({}, {*bare, *hello}), " hello");
  EXPECT_EQ(stream({}, {*hello}), "hello");
  ASSERT_TRUE(tok->bos_id().has_value());
  const std::vector<int32_t> bos_only = {*tok->bos_id()};
  EXPECT_EQ(stream(bos_only, {*hello}), "hello");
  EXPECT_EQ(stream({}, {*tok->bos_id(), *hello}), "hello");
  EXPECT_EQ(stream(bos_only, {*hello}, /*skip_special=*/false), " hello");
  EXPECT_EQ(stream({}, {*tok->bos_id(), *hello}, /*skip_special=*/false), "<s> hello");
  auto prompt = tok->Encode("hello", false);
  ASSERT_TRUE(prompt.ok());
  prompt->insert(prompt->begin(), *tok->bos_id());
  EXPECT_EQ(stream(*prompt, {*hello}), " hello");
}

TEST(SpmTokenizerTest, SpecialTokensAndSpacePrefixPerSegment) {
  auto tok = LoadViaGguf(true);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(PiecesOf(*tok, "<s>hello", true), (V{"<s>", "\xE2\x96\x81hello"}));
  EXPECT_EQ(PiecesOf(*tok, "<s>", false).front(), "\xE2\x96\x81");  // "<s>" as plain text
  auto no_prefix = LoadViaGguf(/*add_space_prefix=*/false);
  ASSERT_NE(no_prefix, nullptr);
  EXPECT_EQ(PiecesOf(*no_prefix, "hello", false), (V{"he", "llo"}));
  EXPECT_FALSE(no_prefix->StripsLeadingSpace());
}

TEST(SpmTokenizerTest, JsonWithByteFallbackMergesByRank) {
  const Vocab v = SmallVocab();
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) vocab[v.tokens[i]] = i;
  const std::string sp = "\xE2\x96\x81";
  nlohmann::json root = {
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"unk_token", "<unk>"},
        {"vocab", vocab},
        {"merges",
         {"l l", "h e", sp + " he", "ll o", sp + "he llo", "o r", sp + " w", sp + "w or", "l d"}}}},
      {"added_tokens",
       {{{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", {{{"type", "Prepend"}, {"prepend", sp}}, {{"type", "Replace"}}}}}},
  };
  const std::string path = testing::UniqueTempPath("spm_tokenizer.json");
  std::ofstream(path) << root.dump();
  auto tok = LoadTokenizerFromJson(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(PiecesOf(**tok, "hello world", false), (V{sp + "hello", sp + "wor", "ld"}));
  EXPECT_EQ(PiecesOf(**tok, "h\xC3\xA9", false), (V{sp, "h", "<0xC3>", "<0xA9>"}));
  EXPECT_TRUE((*tok)->IsSpecial(1));
}

// Special tokens in the input, as the byte trie matches them (vocab_tokenizer.h): at a position
// the longest piece wins, control pieces only with parse_special, user-defined ones always (a
// user-defined piece inside a longer control one still matches without parse_special), pieces of
// bytes past 0x7F too, and of two tokens with the same piece the lower id (the lowest of the
// allowed kind).
TEST(SpmTokenizerTest, SpecialPiecesLongestFirstLowestIdAmongDuplicates) {
  Vocab v = SmallVocab();
  const int32_t first = static_cast<int32_t>(v.tokens.size());
  v.Add("<|a|>", 0, 3);   // first: a control piece
  v.Add("<|a|>h", 0, 3);  // + 1: a longer control piece starting with it
  v.Add("<u>", 0, 4);     // + 2: user-defined
  v.Add("<d>", 0, 3);     // + 3: a control piece ...
  v.Add("<d>", 0, 4);     // + 4: ... and the same piece user-defined
  v.Add("<u>x", 0, 3);    // + 5: a control piece that starts with the user-defined "<u>"
  v.Add("\xC3\xA9!", 0, 4);  // + 6: user-defined, "é!"
  v.Add("<w>", 0, 4);     // + 7: user-defined ...
  v.Add("<w>", 0, 4);     // + 8: ... twice
  GgufWriter w = VocabGguf(v);
  w.AddBool("tokenizer.ggml.add_space_prefix", false);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  const std::string path = testing::UniqueTempPath("spm_specials.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = LoadTokenizerFromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto h = (*tok)->TokenId("h");
  ASSERT_TRUE(h.has_value());
  const std::string text = "h<|a|>hh<|a|><u><d><|a<u>x\xC3\xA9!<w>";
  EXPECT_EQ((*tok)->Encode(text, /*parse_special=*/true).value(),
            (std::vector<int32_t>{*h, first + 1, *h, first, first + 2, first + 3,
                                  // "<|a": no piece ends here; plain text, byte by byte
                                  3 + '<', 3 + '|', 3 + 'a', first + 5, first + 6, first + 7}));
  const std::vector<int32_t> plain = (*tok)->Encode(text, /*parse_special=*/false).value();
  std::vector<int32_t> specials;
  for (int32_t id : plain) {
    if (id >= first) specials.push_back(id);
  }
  EXPECT_EQ(specials, (std::vector<int32_t>{first + 2, first + 4, first + 2, first + 6, first + 7}));
  EXPECT_EQ((*tok)->Decode(plain), text);
  // skip_special_tokens (the detokenizer's default) leaves out the control pieces' text only:
  // user-defined pieces are text, as Hugging Face's added tokens that are not special.
  EXPECT_TRUE((*tok)->IsSkippedSpecial(first));
  EXPECT_FALSE((*tok)->IsSkippedSpecial(first + 2));
  IncrementalDetokenizer detok(tok->get());
  std::string streamed;
  for (int32_t id : {first, first + 2, *h, first + 3, first + 4}) streamed += detok.Push(id);
  EXPECT_EQ(streamed + detok.Flush(), "<u>h<d>");
}

}  // namespace
}  // namespace rtgen
