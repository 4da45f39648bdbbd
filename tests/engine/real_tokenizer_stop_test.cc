// Stop strings and streaming text with the real SmolLM2 byte-level BPE tokenizer: the scripted
// fake backend emits real token ids, so stop strings land across real token boundaries.

#include <gtest/gtest.h>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/step_driver.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

class RealTokenizerStopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = GgufFile::Open(RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    auto tok = LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(tok).value().release();
  }
  static void TearDownTestSuite() { delete tok_; }

  // Runs one scripted request to completion; the script is the encoding of `text`.
  Recorded Run(const std::string& text, std::vector<std::string> stops, bool ignore_eos,
               std::vector<int32_t>* script_out = nullptr, int32_t max_tokens = 64) {
    auto ids = tok_->Encode(text, /*parse_special=*/true);
    EXPECT_TRUE(ids.ok());
    std::vector<int32_t> script = *ids;
    if (script_out != nullptr) *script_out = script;
    SchedulerConfig config;
    config.num_kv_blocks = 64;
    config.max_model_len = 1024;
    StepDriver d(config, tok_);
    const int32_t key = 1000;  // first prompt token selects the script
    d.backend.Script(key, script);
    Request r = MakeRequest("r", {key, 1001, 1002}, max_tokens);
    r.stopping.stop = std::move(stops);
    r.stopping.ignore_eos = ignore_eos;
    Recorded rec;
    d.scheduler.Add(MakeSeq(tok_, std::move(r), &rec));
    while (d.scheduler.num_live() > 0) d.Step();
    return rec;
  }

  static Tokenizer* tok_;
};

Tokenizer* RealTokenizerStopTest::tok_ = nullptr;

TEST_F(RealTokenizerStopTest, StopStringAcrossTokensIsCut) {
  std::vector<int32_t> script;
  Recorded rec = Run("Hello world, the answer is 42. Goodbye", {"swer is"}, true, &script);
  EXPECT_EQ(rec.text(), "Hello world, the an");
  EXPECT_EQ(rec.last().finish, FinishReason::kStop);
  EXPECT_EQ(rec.last().stop_reason, "swer is");
  EXPECT_LT(rec.tokens().size(), script.size());
  EXPECT_EQ(rec.finals, 1);
}

TEST_F(RealTokenizerStopTest, StreamedTextEqualsWholeDecodeWithoutStops) {
  const std::string text = "Caf\xC3\xA9 na\xC3\xAFve \xE2\x9C\x93 done";
  std::vector<int32_t> script;
  Recorded rec = Run(text, {}, true, &script);
  const std::vector<int32_t> tokens = rec.tokens();
  ASSERT_GE(tokens.size(), script.size());
  std::vector<int32_t> first(tokens.begin(),
                             tokens.begin() + static_cast<std::ptrdiff_t>(script.size()));
  EXPECT_EQ(first, script);
  EXPECT_EQ(rec.text().substr(0, text.size()), text);
  for (const auto& c : rec.chunks) {
    // Every chunk is complete UTF-8: no chunk starts with a continuation byte.
    if (!c.text.empty()) {
      EXPECT_NE(static_cast<unsigned char>(c.text[0]) & 0xC0, 0x80);
    }
  }
}

TEST_F(RealTokenizerStopTest, EndOfTurnTokenStops) {
  Recorded rec = Run("Sure.<|im_end|>more", {}, false);
  EXPECT_EQ(rec.text(), "Sure.");
  EXPECT_EQ(rec.last().finish, FinishReason::kStop);
}

}  // namespace
}  // namespace rtgen::testing
