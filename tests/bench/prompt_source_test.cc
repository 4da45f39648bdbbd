#include "client/bench/prompt_source.h"

#include <gtest/gtest.h>

namespace rtgen::bench {
namespace {

TEST(PromptSourceTest, SyntheticPromptsShareThePrefixAndStayInRange) {
  WorkloadConfig config;
  config.input_len = 40;
  config.input_len_range = 0.5;  // lengths in [20, 60]
  config.output_len = 10;
  config.output_len_range = 0.2;  // [8, 12]
  config.shared_prefix_len = 16;
  config.seed = 3;
  const TokenRange range = TokenRangeForVocab(49152, 1, 2);
  absl::StatusOr<PromptSource> source = PromptSource::Create(config, range);
  ASSERT_TRUE(source.ok()) << source.status();
  const BenchPrompt first = source->Next();
  bool lengths_vary = false;
  for (int i = 0; i < 200; ++i) {
    const BenchPrompt p = source->Next();
    ASSERT_GE(p.token_ids.size(), 20u);
    ASSERT_LE(p.token_ids.size(), 60u);
    ASSERT_GE(p.max_tokens, 8);
    ASSERT_LE(p.max_tokens, 12);
    lengths_vary = lengths_vary || p.token_ids.size() != first.token_ids.size();
    for (int j = 0; j < 16; ++j) ASSERT_EQ(p.token_ids[j], first.token_ids[j]);
    for (int32_t id : p.token_ids) {
      ASSERT_GE(id, range.first);
      ASSERT_LT(id, range.last);
      ASSERT_NE(id, 1);
      ASSERT_NE(id, 2);
    }
  }
  EXPECT_TRUE(lengths_vary);
  EXPECT_NE(first.token_ids[16], source->Next().token_ids[16]);  // only the prefix is shared
}

TEST(PromptSourceTest, TokenRangeSkipsBothEndsOfTheVocabulary) {
  const TokenRange range = TokenRangeForVocab(128256, std::nullopt, std::nullopt);
  EXPECT_EQ(range.first, 1000);
  EXPECT_LE(range.last, 128000);
}

TEST(PromptSourceTest, RejectsAPrefixAsLongAsThePrompt) {
  WorkloadConfig config;
  config.input_len = 32;
  config.shared_prefix_len = 32;
  absl::StatusOr<PromptSource> source =
      PromptSource::Create(config, TokenRangeForVocab(49152, std::nullopt, std::nullopt));
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("--shared-prefix-len"), absl::string_view::npos);
}

TEST(PromptsJsonlTest, ParsesPromptsAndDefaultsMaxTokens) {
  absl::StatusOr<std::vector<BenchPrompt>> prompts =
      ParsePromptsJsonl("{\"prompt\": \"hi\", \"max_tokens\": 5}\n\n{\"prompt\": \"yo\"}\n", 7);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 2u);
  EXPECT_EQ((*prompts)[0].text, "hi");
  EXPECT_EQ((*prompts)[0].max_tokens, 5);
  EXPECT_EQ((*prompts)[1].max_tokens, 7);
}

TEST(PromptsJsonlTest, ErrorsNameTheLineAndField) {
  absl::StatusOr<std::vector<BenchPrompt>> bad =
      ParsePromptsJsonl("{\"prompt\": \"ok\"}\n{\"prompt\": \"x\", \"max_tokens\": 0}\n", 7);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), absl::string_view::npos);
  EXPECT_NE(bad.status().message().find("max_tokens"), absl::string_view::npos);
  EXPECT_FALSE(ParsePromptsJsonl("not json\n", 7).ok());
  EXPECT_FALSE(ParsePromptsJsonl("{\"text\": \"x\"}\n", 7).ok());
  EXPECT_FALSE(ParsePromptsJsonl("\n", 7).ok());
}

}  // namespace
}  // namespace rtgen::bench
