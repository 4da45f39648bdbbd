// Long inputs must encode in reasonable time (the BPE merge loop is O(n log n) per pre-token)
// and round-trip; a pathological single pre-token (one long run of letters) included; and a long
// pre-token is not kept in the BPE word cache (a client's distinct long runs would grow it
// without bound in bytes).

#include <string>
#include <vector>

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

// EncodeAtMost: the first limit + 1 ids of the whole encoding where the text has more, and all of
// them where it has not; the BPE stops there, so the words after it are never encoded (none of
// them reaches the word cache).
TEST(LargeInputTest, EncodeAtMostStopsPastTheLimit) {
  // A tokenizer of its own: the shared one's cache may be cleared (full) while this one counts.
  auto file = GgufFile::Open(testing::kSmolLmGguf);
  ASSERT_TRUE(file.ok()) << file.status();
  auto loaded = LoadTokenizerFromGguf(**file);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto* bpe = dynamic_cast<const ByteLevelBpeTokenizer*>(loaded->get());
  ASSERT_NE(bpe, nullptr);
  // Distinct words, one pre-token each, with special-token text among them.
  // Letters only: SmolLM2's pre-tokenizer cuts every digit off as its own piece.
  const auto letters = [](int n) {
    std::string s;
    for (int k = 0; k < 3; ++k, n /= 26) s += static_cast<char>('a' + n % 26);
    return s;
  };
  std::string text;
  for (int i = 0; i < 4000; ++i) {
    text += " kwq" + letters(i) + "v";
    if (i % 500 == 0) text += "<|im_end|>";
  }
  // The whole encoding comes last: until then the cache shows how far encoding went.
  const size_t before = bpe->cached_words();
  ASSERT_EQ(before, 0u);
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
    SCOPED_TRACE(limit);
    auto some = bpe->EncodeAtMost(text, /*parse_special=*/true, limit);
    ASSERT_TRUE(some.ok()) << some.status();
    EXPECT_EQ(some->size(), limit + 1);
  }
  // At most the words up to the last limit's (each a handful of tokens, so < 301 words).
  EXPECT_LE(bpe->cached_words(), before + 301);
  auto all = bpe->Encode(text, /*parse_special=*/true);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_GT(all->size(), 4000u);
  EXPECT_GT(bpe->cached_words(), before + 3000);
  for (const size_t limit : {size_t{0}, size_t{7}, size_t{300}, all->size() - 1}) {
    SCOPED_TRACE(limit);
    auto some = bpe->EncodeAtMost(text, /*parse_special=*/true, limit);
    ASSERT_TRUE(some.ok()) << some.status();
    EXPECT_EQ(*some, std::vector<int32_t>(all->begin(), all->begin() + limit + 1));
  }
  for (const size_t limit : {all->size(), all->size() + 5}) {
    auto whole = bpe->EncodeAtMost(text, /*parse_special=*/true, limit);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(*whole, *all);
  }
  // Invalid UTF-8 is refused whatever the limit.
  EXPECT_EQ(bpe->EncodeAtMost("ok \xff", true, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
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
