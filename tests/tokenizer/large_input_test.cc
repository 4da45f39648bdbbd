// Long inputs must encode in reasonable time (the BPE merge loop is O(n log n) per pre-token)
// and round-trip; a pathological single pre-token (one long run of letters) included; and a long
// pre-token is not kept in the BPE word cache (a client's distinct long runs would grow it
// without bound in bytes).

#include <string>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

void ExpectRoundTrip(const std::string& text) {
  const Tokenizer& tok = testing::SmolLmTokenizer();
  auto ids = tok.Encode(text, /*parse_special=*/true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_GT(ids->size(), 0u);
  EXPECT_LT(ids->size(), text.size() + 1);
  EXPECT_EQ(tok.Decode(*ids), text);
}

TEST(LargeInputTest, MegabyteOfMixedTextRoundTrips) {
  const auto rows =
      testing::ReadJsonLines(std::string(testing::kGoldenDir) + "/tokenization.jsonl");
  std::string text;
  for (size_t i = 0; text.size() < (1 << 20); ++i) {
    const std::string row = rows[i % rows.size()]["decoded"];
    text += row;
    text += ' ';
  }
  ExpectRoundTrip(text);
}

TEST(LargeInputTest, OneHugePreTokenRoundTrips) {
  ExpectRoundTrip(std::string(200000, 'a'));
  ExpectRoundTrip(std::string(200000, ' '));
  std::string cjk;
  for (int i = 0; i < 50000; ++i) cjk += "\xE6\x97\xA5";  // 日, one \p{L} run
  ExpectRoundTrip(cjk);
}

TEST(LargeInputTest, LongPreTokensAreNotCached) {
  const auto* bpe = dynamic_cast<const ByteLevelBpeTokenizer*>(&testing::SmolLmTokenizer());
  ASSERT_NE(bpe, nullptr);
  const size_t before = bpe->cached_words();
  for (int i = 0; i < 20; ++i) {  // distinct runs of letters, one pre-token each
    ASSERT_TRUE(bpe->Encode(std::string(4096 + i, 'b'), false).ok());
  }
  EXPECT_EQ(bpe->cached_words(), before);
  // A short word still is (the pre-tokenizer keeps the space with the word); one this process
  // has not encoded yet, so that the test holds under --gtest_repeat too.
  static int run = 0;
  const std::string word = std::string(" zq") + static_cast<char>('a' + run % 26) +
                           static_cast<char>('a' + run / 26 % 26) + "xv";
  ++run;
  ASSERT_TRUE(bpe->Encode(word, false).ok());
  EXPECT_EQ(bpe->cached_words(), before + 1);
}

}  // namespace
}  // namespace rtgen
