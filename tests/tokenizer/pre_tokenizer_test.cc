#include "engine/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

std::vector<std::string> Pieces(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : PreTokenize(kind, text)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2SplitsWordsNumbersPunctuationAndSpaces) {
  EXPECT_EQ(Pieces(PreTokenizerKind::kGpt2, "Hello  world, it's 2024!\n\nok"),
            (V{"Hello", " ", " world", ",", " it", "'s", " 2024", "!", "\n", "\n", "ok"}));
  EXPECT_EQ(Pieces(PreTokenizerKind::kGpt2, "IT'S a\tb   "),
            (V{"IT", "'", "S", " a", "\t", "b", "   "}));
}

TEST(PreTokenizerTest, IndividualDigitsIsolatesEveryNumberCharacter) {
  EXPECT_EQ(Pieces(PreTokenizerKind::kGpt2IndividualDigits, "x 123  4²"),
            (V{"x", " ", "1", "2", "3", "  ", "4", "²"}));
}

TEST(PreTokenizerTest, Llama3MatchesHuggingFaceOnGoldenStrings) {
  const auto rows =
      testing::ReadJsonLines(std::string(testing::kGoldenDir) + "/tokenization.jsonl");
  ASSERT_GE(rows.size(), 300u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string text = rows[i]["text"];
    EXPECT_EQ(Pieces(PreTokenizerKind::kLlama3, text), rows[i]["llama3_pieces"].get<V>())
        << "row " << i << " text \"" << text << "\"";
  }
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndContractionsIgnoreCase) {
  EXPECT_EQ(Pieces(PreTokenizerKind::kLlama3, "1234567 IT'S"), (V{"123", "456", "7", " IT", "'S"}));
}

}  // namespace
}  // namespace rtgen
