#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

TEST(SpecialTokensTest, ParsedOnlyWhenAsked) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  auto parsed = tok.Encode(text, /*parse_special=*/true);
  auto plain = tok.Encode(text, /*parse_special=*/false);
  ASSERT_TRUE(parsed.ok() && plain.ok());
  ASSERT_GE(parsed->size(), 3u);
  EXPECT_EQ(parsed->front(), 1);
  EXPECT_EQ(parsed->back(), 2);
  for (int32_t id : *plain) EXPECT_FALSE(tok.IsSpecial(id)) << id;
  EXPECT_GT(plain->size(), parsed->size());
  EXPECT_EQ(tok.Decode(*plain), text);
  EXPECT_EQ(tok.Decode(*parsed), text);
}

TEST(SpecialTokensTest, LookupsAndFlags) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.TokenId("<|im_end|>"), std::optional<int32_t>(2));
  EXPECT_EQ(tok.TokenId("no such piece"), std::nullopt);
  EXPECT_TRUE(tok.IsSpecial(0));
  EXPECT_TRUE(tok.IsSpecial(16));
  EXPECT_FALSE(tok.IsSpecial(17));
  EXPECT_FALSE(tok.IsSpecial(-1));
  EXPECT_FALSE(tok.IsSpecial(tok.vocab_size()));
  EXPECT_EQ(tok.TokenBytes(1), "<|im_start|>");
  EXPECT_EQ(tok.TokenBytes(tok.vocab_size()), "");
}

TEST(SpecialTokensTest, IncompleteSpecialTextIsPlainText) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  auto ids = tok.Encode("<|im_start", /*parse_special=*/true);
  ASSERT_TRUE(ids.ok());
  for (int32_t id : *ids) EXPECT_FALSE(tok.IsSpecial(id));
  EXPECT_EQ(tok.Decode(*ids), "<|im_start");
}

}  // namespace
}  // namespace rtgen
