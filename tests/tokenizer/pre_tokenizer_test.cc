#include "engine/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
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

TEST(PreTokenizerTest, Llama3SplitsALongDigitRunInLinearTime) {
  // Each three-digit piece scanned to the end of the whole run: a megabyte of digits took ~50 s
  // (200,000 took 2.0 s), a 4 MiB request ~13 minutes of a server thread. Linear, it is a few
  // tens of milliseconds: the bound only separates the two.
  std::string digits;
  for (int i = 0; i < 100000; ++i) digits += "1234567890";
  const absl::Time start = absl::Now();
  const std::vector<std::string_view> pieces = PreTokenize(PreTokenizerKind::kLlama3, digits);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(pieces.size(), 333334u);
  EXPECT_EQ(pieces.front(), "123");
  EXPECT_EQ(pieces[1], "456");
  EXPECT_EQ(pieces.back(), "0");
  EXPECT_LT(took, absl::Seconds(5)) << "1,000,000 digits";
}

}  // namespace
}  // namespace rtgen
