#include "engine/common/utf8.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_data.h"

namespace rtgen {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("\xF4\x8F\xBF\xBF"), std::nullopt);  // U+10FFFF
}

TEST(Utf8Test, ReportsTheOffsetOfTheFirstBadSequence) {
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), std::optional<size_t>(2));             // stray continuation
  EXPECT_EQ(FindInvalidUtf8("a\xC0\xAF"), std::optional<size_t>(1));          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), std::optional<size_t>(0));       // surrogate
  EXPECT_EQ(FindInvalidUtf8("x\xF4\x90\x80\x80"), std::optional<size_t>(1));  // > U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abc\xE6\x97"), std::optional<size_t>(3));        // truncated
  EXPECT_EQ(FindInvalidUtf8("\xFF"), std::optional<size_t>(0));
}

TEST(Utf8Test, EncodeRejectsInvalidUtf8NamingTheByte) {
  auto ids = testing::SmolLmTokenizer().Encode("hello \xC3(", /*parse_special=*/false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ids.status().message(), "text is not valid UTF-8 at byte 6"))
      << ids.status();
}

TEST(Utf8Test, TakeValidHoldsBackAnIncompleteTail) {
  std::string pending = "a\xE6\x97";
  EXPECT_EQ(TakeValidUtf8(&pending, /*flush=*/false), "a");
  EXPECT_EQ(pending, "\xE6\x97");
  pending += "\xA5!";
  EXPECT_EQ(TakeValidUtf8(&pending, /*flush=*/false), "\xE6\x97\xA5!");
  EXPECT_EQ(pending, "");
}

TEST(Utf8Test, TakeValidReplacesInvalidBytes) {
  std::string pending =
      "a\x80"
      "b\xE6\x97(";  // stray byte; 2-byte prefix cut by '('
  EXPECT_EQ(TakeValidUtf8(&pending, /*flush=*/false),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD(");
  EXPECT_EQ(pending, "");
  pending = "z\xF0\x9F";
  EXPECT_EQ(TakeValidUtf8(&pending, /*flush=*/true), "z\xEF\xBF\xBD");
  EXPECT_EQ(pending, "");
}

}  // namespace
}  // namespace rtgen
