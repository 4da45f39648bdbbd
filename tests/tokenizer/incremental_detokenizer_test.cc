#include <algorithm>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/common/utf8.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

// Text whose characters are split over several byte-level tokens (CJK, emoji, ZWJ sequences).
constexpr char kMultiByte[] =
    "日本語 😀 👨‍👩‍👧‍👦 🇫🇷 café ✨ 한국어";

TEST(IncrementalDetokenizerTest, NeverEmitsPartialUtf8AndReassemblesTheText) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  auto ids = tok.Encode(kMultiByte, /*parse_special=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  // The test only means something when some token ends inside a character.
  int partial_tokens = 0;
  for (int32_t id : *ids) partial_tokens += FindInvalidUtf8(tok.TokenBytes(id)).has_value();
  ASSERT_GT(partial_tokens, 0);

  IncrementalDetokenizer detok(&tok);
  std::string streamed;
  int empty_pushes = 0;
  for (int32_t id : *ids) {
    const std::string delta = detok.Push(id);
    EXPECT_EQ(FindInvalidUtf8(delta), std::nullopt) << "delta for token " << id;
    empty_pushes += delta.empty();
    streamed += delta;
  }
  streamed += detok.Flush();
  EXPECT_EQ(streamed, kMultiByte);
  EXPECT_GT(empty_pushes, 0);  // bytes were held back at least once
}

TEST(IncrementalDetokenizerTest, FlushTurnsAnIncompleteTailIntoReplacementCharacter) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  auto ids = tok.Encode("😀", /*parse_special=*/false);
  ASSERT_TRUE(ids.ok());
  ASSERT_GT(ids->size(), 1u);  // the emoji spans several tokens
  IncrementalDetokenizer detok(&tok);
  EXPECT_EQ(detok.Push((*ids)[0]), "");
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, InvalidSequenceBecomesReplacementCharacter) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  // A lead byte followed by an ASCII token can never complete.
  auto lead = tok.Encode("😀", /*parse_special=*/false);
  auto ascii = tok.Encode("A", /*parse_special=*/false);
  ASSERT_TRUE(lead.ok() && ascii.ok());
  IncrementalDetokenizer detok(&tok);
  std::string out = detok.Push((*lead)[0]);
  out += detok.Push((*ascii)[0]);
  out += detok.Flush();
  EXPECT_EQ(out,
            "\xEF\xBF\xBD"
            "A");
}

TEST(IncrementalDetokenizerTest, SpecialTokensStreamAsTheirTextWhereKept) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  IncrementalDetokenizer detok(&tok, {}, /*skip_special=*/false);
  EXPECT_EQ(detok.Push(2), "<|im_end|>");
  EXPECT_EQ(detok.Push(-5), "");  // out of range
}

// Skipped by default (vLLM's skip_special_tokens): SmolLM2's control tokens (<|im_start|>,
// <|im_end|>, <|endoftext|>) give no text; the text around them streams as it is.
TEST(IncrementalDetokenizerTest, ControlTokensGiveNoTextByDefault) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  auto ids = tok.Encode("Hi<|im_end|> there<|im_start|>", /*parse_special=*/true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(std::count_if(ids->begin(), ids->end(),
                          [&](int32_t id) { return tok.IsSkippedSpecial(id); }),
            2);
  IncrementalDetokenizer detok(&tok);
  std::string text;
  for (int32_t id : *ids) text += detok.Push(id);
  EXPECT_EQ(text + detok.Flush(), "Hi there");
}

}  // namespace
}  // namespace rtgen
