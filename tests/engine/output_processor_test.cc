#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

class OutputProcessorTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> stops, int32_t max_tokens = 100, bool ignore_eos = false) {
    Request r = MakeRequest("r", {1, 2, 3}, max_tokens);
    r.stopping.stop = std::move(stops);
    r.stopping.ignore_eos = ignore_eos;
    seq_ = MakeSeq(&tok_, std::move(r), nullptr);
  }
  // Feeds tokens until one finishes the request; returns the concatenated text.
  std::string Feed(const std::vector<int32_t>& ids) {
    std::string text;
    for (int32_t id : ids) {
      TokenResult r = AppendSampledToken(*seq_, id, tok_, 1000);
      text += r.text;
      last_ = r;
      if (r.finish != FinishReason::kNone) break;
    }
    return text;
  }
  FakeTokenizer tok_;
  std::unique_ptr<Sequence> seq_;
  TokenResult last_;
};

TEST_F(OutputProcessorTest, StopStringSplitAcrossTokensIsCutAndHeldBack) {
  Start({"STOP"});
  std::string streamed;
  for (int32_t id : {'x', 'S', 'T', 'O'}) {
    TokenResult r = AppendSampledToken(*seq_, id, tok_, 1000);
    EXPECT_EQ(r.finish, FinishReason::kNone);
    streamed += r.text;
  }
  EXPECT_EQ(streamed, "x");  // "STO" could still become "STOP"
  TokenResult r = AppendSampledToken(*seq_, 'P', tok_, 1000);
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_reason, "STOP");
  EXPECT_EQ(streamed + r.text, "x");
}

TEST_F(OutputProcessorTest, HeldTextIsReleasedWhenItIsNotAStop) {
  Start({"STOP"});
  EXPECT_EQ(Feed({'S', 'T', 'x', 'y'}), "STxy");
  EXPECT_EQ(last_.finish, FinishReason::kNone);
}

TEST_F(OutputProcessorTest, StopStringInsideMultiBytePieces) {
  Start({"TO"});
  // "ST" then "OP": the text is "STOP"; the stop "TO" starts inside the first piece.
  EXPECT_EQ(Feed({'a', 256, 257}), "aS");
  EXPECT_EQ(last_.finish, FinishReason::kStop);
  EXPECT_EQ(last_.stop_reason, "TO");
}

TEST_F(OutputProcessorTest, EarliestOfSeveralStopStringsWins) {
  Start({"cd", "bc"});
  EXPECT_EQ(Feed({'a', 'b', 'c', 'd'}), "a");
  EXPECT_EQ(last_.stop_reason, "bc");
}

TEST_F(OutputProcessorTest, EosStopsWithoutItsText) {
  Start({});
  EXPECT_EQ(Feed({'h', 'i', kFakeEos, 'z'}), "hi");
  EXPECT_EQ(last_.finish, FinishReason::kStop);
  EXPECT_EQ(seq_->num_output_tokens(), 3);
}

TEST_F(OutputProcessorTest, EndOfTurnTokenIsAStopId) {
  Start({});
  Feed({'h', kFakeImEnd});
  EXPECT_EQ(last_.finish, FinishReason::kStop);
}

TEST_F(OutputProcessorTest, IgnoreEosKeepsGoingButStopTokenIdsStillStop) {
  Request r = MakeRequest("r", {1}, 100);
  r.stopping.ignore_eos = true;
  r.stopping.stop_token_ids = {'q'};
  seq_ = MakeSeq(&tok_, std::move(r), nullptr);
  const std::string text = Feed({'a', kFakeEos, 'b', 'q', 'c'});
  EXPECT_EQ(text.front(), 'a');
  EXPECT_EQ(text.back(), 'b');
  EXPECT_EQ(last_.finish, FinishReason::kStop);
  EXPECT_EQ(seq_->num_output_tokens(), 4);
}

// Under ignore_eos the EOS and end-of-turn tokens (special) are generated tokens like any other:
// their ids count, and their text is left out unless the request keeps special tokens.
TEST_F(OutputProcessorTest, SpecialTokensTextIsSkippedUnlessKept) {
  for (const bool skip : {true, false}) {
    SCOPED_TRACE(skip ? "skipped" : "kept");
    Request r = MakeRequest("r", {1}, 5);
    r.stopping.ignore_eos = true;
    r.skip_special_tokens = skip;
    seq_ = MakeSeq(&tok_, std::move(r), nullptr);
    // A two-byte character split by the special tokens still streams whole.
    const std::string text = Feed({'a', kFakeEos, 0xC3, kFakeImEnd, 0xA9});
    EXPECT_EQ(text, skip ? "a\xC3\xA9"
                         : "a" + tok_.TokenBytes(kFakeEos) + "\xEF\xBF\xBD" +
                               tok_.TokenBytes(kFakeImEnd) + "\xEF\xBF\xBD");
    EXPECT_EQ(last_.finish, FinishReason::kLength);
    EXPECT_EQ(seq_->num_output_tokens(), 5);
  }
}

TEST_F(OutputProcessorTest, MaxTokensEndsWithLengthAndReleasesHeldText) {
  Start({"STOP"}, 3);
  EXPECT_EQ(Feed({'a', 'S', 'T', 'x'}), "aST");
  EXPECT_EQ(last_.finish, FinishReason::kLength);
  EXPECT_EQ(seq_->num_output_tokens(), 3);
}

TEST_F(OutputProcessorTest, SplitUtf8CharacterIsStreamedWhole) {
  Start({});
  TokenResult a = AppendSampledToken(*seq_, 0xC3, tok_, 1000);
  EXPECT_EQ(a.text, "");
  TokenResult b = AppendSampledToken(*seq_, 0xA9, tok_, 1000);
  EXPECT_EQ(b.text, "\xC3\xA9");
}

TEST_F(OutputProcessorTest, HoldbackIsLongestStopPrefixSuffix) {
  const std::vector<std::string> stops = {"abc", "xyz"};
  EXPECT_EQ(StopStringHoldback("qqab", stops), 2u);
  EXPECT_EQ(StopStringHoldback("qqx", stops), 1u);
  EXPECT_EQ(StopStringHoldback("qqq", stops), 0u);
  EXPECT_EQ(StopStringHoldback("abc", stops), 0u);  // a whole match is found, not held
}

}  // namespace
}  // namespace rtgen::testing
