// ToEngineRequest / TokenizePrompt directly, with a byte-level tokenizer: UTF-8 checks of every
// text field and BOS handling (tests/server/invalid_request_test.cc sends the same over the wire).

#include "server/request_validation.h"

#include <gtest/gtest.h>

#include "server/utf8.h"

namespace rtgen {
namespace {

// One token per byte; id 256 is BOS.
class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(bool add_bos) {
    vocab_size_ = 257;
    bos_id_ = 256;
    eos_id_ = 256;
    add_bos_ = add_bos;
  }
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string TokenBytes(int32_t id) const override {
    return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "";
  }
};

ValidationLimits Limits(const Tokenizer* tokenizer) {
  ValidationLimits limits;
  limits.tokenizer = tokenizer;
  limits.max_model_len = 64;
  limits.default_max_tokens = 256;
  return limits;
}

void ExpectInvalid(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(field), absl::string_view::npos)
      << "'" << status.message() << "' does not name " << field;
}

TEST(RequestValidationTest, InvalidUtf8PromptNamesThePrompt) {
  ByteTokenizer tokenizer(false);
  v1::GenerateRequest request;
  request.set_prompt("abc\xC3(");
  ExpectInvalid(ToEngineRequest(request, Limits(&tokenizer)).status(), "prompt");
  request.set_prompt("overlong \xC0\xAF");
  ExpectInvalid(ToEngineRequest(request, Limits(&tokenizer)).status(), "prompt");
}

TEST(RequestValidationTest, InvalidUtf8MessageNamesTheMessage) {
  ByteTokenizer tokenizer(false);
  const ChatTemplate chat = ChatTemplate::ChatML("");
  ValidationLimits limits = Limits(&tokenizer);
  limits.chat_template = &chat;
  v1::GenerateRequest request;
  auto* m = request.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("\xFF");
  ExpectInvalid(ToEngineRequest(request, limits).status(), "messages[0].content");
}

// The Llama 2 format renders a lone system message as "": Generate and Tokenize refuse it by
// naming `messages` (Generate was refused later as an empty "prompt", Tokenize answered OK).
TEST(RequestValidationTest, MessagesRenderingNoTokensNameTheMessages) {
  ByteTokenizer tokenizer(false);
  absl::StatusOr<ChatTemplate> chat =
      ChatTemplate::FromJinja("{{ '[INST] <<SYS>>' + content + ' [/INST]' }}", "");
  ASSERT_TRUE(chat.ok()) << chat.status();
  ASSERT_EQ(chat->format(), ChatTemplate::Format::kLlama2);
  ValidationLimits limits = Limits(&tokenizer);
  limits.chat_template = &*chat;
  v1::GenerateRequest request;
  auto* m = request.mutable_messages()->add_messages();
  m->set_role("system");
  m->set_content("be brief");
  ExpectInvalid(ToEngineRequest(request, limits).status(), "messages");
  v1::TokenizeRequest tokenize;
  *tokenize.mutable_messages() = request.messages();
  ExpectInvalid(TokenizeRequestInput(tokenize, limits).status(), "messages");
  m->set_role("user");
  EXPECT_TRUE(ToEngineRequest(request, limits).ok());
}

TEST(RequestValidationTest, MessagesWithoutAChatTemplateAreRefused) {
  ByteTokenizer tokenizer(false);
  v1::GenerateRequest request;
  auto* m = request.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  ExpectInvalid(ToEngineRequest(request, Limits(&tokenizer)).status(), "chat template");
}

TEST(RequestValidationTest, BosFollowsTheModelUnlessTheRequestSays) {
  ByteTokenizer wants_bos(true);
  v1::GenerateRequest request;
  request.set_prompt("hi");
  absl::StatusOr<Request> with = ToEngineRequest(request, Limits(&wants_bos));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->prompt_tokens, (std::vector<int32_t>{256, 'h', 'i'}));

  request.set_add_special_tokens(false);
  absl::StatusOr<Request> without = ToEngineRequest(request, Limits(&wants_bos));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->prompt_tokens, (std::vector<int32_t>{'h', 'i'}));

  ByteTokenizer no_bos(false);
  request.set_add_special_tokens(true);
  absl::StatusOr<Request> forced = ToEngineRequest(request, Limits(&no_bos));
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->prompt_tokens.front(), 256);
}

// A prompt or chat of more than four contexts of tokens is refused with its encoding stopped
// there; one under that, with its exact count.
TEST(RequestValidationTest, APromptFarPastTheContextIsRefusedWithoutItsCount) {
  ByteTokenizer tokenizer(false);
  const ChatTemplate chat = ChatTemplate::ChatML("");
  ValidationLimits limits = Limits(&tokenizer);  // a context of 64 tokens
  limits.chat_template = &chat;
  ASSERT_EQ(MaxPromptTokensEncoded(limits), 256);
  v1::GenerateRequest request;
  request.set_prompt(std::string(256, 'a'));
  ExpectInvalid(ToEngineRequest(request, limits).status(),
                "prompt: 256 prompt tokens leave no room to generate within the context length "
                "of 64 tokens");
  request.set_prompt(std::string(257, 'a'));
  ExpectInvalid(ToEngineRequest(request, limits).status(),
                "prompt: more than 256 prompt tokens (encoding stopped there) leave no room to "
                "generate within the context length of 64 tokens");
  v1::GenerateRequest messages;
  auto* m = messages.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content(std::string(1000, 'a'));
  ExpectInvalid(ToEngineRequest(messages, limits).status(), "messages: more than 256 prompt");
  // Tokenize is not refused for length: every id.
  v1::TokenizeRequest tokenize;
  tokenize.set_prompt(std::string(1000, 'a'));
  absl::StatusOr<TokenizedPrompt> all = TokenizeRequestInput(tokenize, limits);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->token_ids.size(), 1000u);
  EXPECT_FALSE(all->stopped_early);
  // BOS comes after the limit: 256 letters and BOS are counted exactly (257), 257 are not.
  ByteTokenizer wants_bos(true);
  limits.tokenizer = &wants_bos;
  request.set_prompt(std::string(256, 'a'));
  ExpectInvalid(ToEngineRequest(request, limits).status(), "prompt: 257 prompt tokens leave");
  request.set_prompt(std::string(257, 'a'));
  ExpectInvalid(ToEngineRequest(request, limits).status(), "prompt: more than 256 prompt");
}

// Unset: special tokens' text is skipped, as vLLM's default; false keeps it.
TEST(RequestValidationTest, SkipSpecialTokensIsOnUnlessTheRequestSays) {
  ByteTokenizer tokenizer(false);
  v1::GenerateRequest request;
  request.set_prompt("hi");
  absl::StatusOr<Request> unset = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_TRUE(unset->skip_special_tokens);
  request.set_skip_special_tokens(false);
  absl::StatusOr<Request> kept = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->skip_special_tokens);
  request.set_skip_special_tokens(true);
  absl::StatusOr<Request> skipped = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_TRUE(skipped->skip_special_tokens);
}

TEST(RequestValidationTest, TokenIdsPassThroughUnchanged) {
  ByteTokenizer tokenizer(true);
  v1::GenerateRequest request;
  for (int id : {5, 6, 7}) request.mutable_prompt_token_ids()->add_ids(id);
  absl::StatusOr<Request> out = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->prompt_tokens, (std::vector<int32_t>{5, 6, 7}));
}

// An unknown role is echoed sanitized: a status message travels as UTF-8.
TEST(RequestValidationTest, AnUnknownRoleIsEchoedAsValidUtf8) {
  ByteTokenizer tokenizer(false);
  const ChatTemplate chat = ChatTemplate::ChatML("");
  ValidationLimits limits = Limits(&tokenizer);
  limits.chat_template = &chat;
  for (const std::string& role : {std::string(40, '\xff'), std::string("b\xC3(d")}) {
    v1::GenerateRequest request;
    auto* m = request.mutable_messages()->add_messages();
    m->set_role(role);
    m->set_content("x");
    const absl::Status s = ToEngineRequest(request, limits).status();
    ExpectInvalid(s, "messages[0].role");
    EXPECT_TRUE(IsValidUtf8(s.message())) << s;
  }
}

TEST(RequestValidationTest, TopKMinusOneIsOffOtherNegativesAreRefused) {
  // vLLM's "off" is -1; here 0 is, and -1 is taken as it. -2 is still an error naming the field.
  ByteTokenizer tokenizer(false);
  v1::GenerateRequest request;
  request.set_prompt("abc");
  request.mutable_sampling()->set_top_k(-1);
  absl::StatusOr<Request> out = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sampling.top_k, 0);
  request.mutable_sampling()->set_top_k(-2);
  ExpectInvalid(ToEngineRequest(request, Limits(&tokenizer)).status(), "sampling.top_k");
}

TEST(RequestValidationTest, UnsetMaxTokensIsClippedToTheContextAndFieldsAreCopied) {
  ByteTokenizer tokenizer(false);
  v1::GenerateRequest request;
  request.set_prompt("0123456789");  // 10 tokens of a 64-token context
  request.mutable_sampling()->set_temperature(0.5f);
  request.mutable_sampling()->set_seed(7);
  request.mutable_stopping()->add_stop("END");
  request.set_priority(3);
  request.set_latency_budget_ms(250);
  absl::StatusOr<Request> out = ToEngineRequest(request, Limits(&tokenizer));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->stopping.max_tokens, 54);
  // --default-max-tokens in a context of 1000: below the room it is the limit; 0 is all of the
  // room (990 after the prompt).
  ValidationLimits defaults = Limits(&tokenizer);
  defaults.max_model_len = 1000;
  EXPECT_EQ(ToEngineRequest(request, defaults)->stopping.max_tokens, 256);
  defaults.default_max_tokens = 0;
  EXPECT_EQ(ToEngineRequest(request, defaults)->stopping.max_tokens, 990);
  // A KV pool of 40 tokens, smaller than the context: clipped to it (30 slots after the prompt,
  // and the last token needs none: 31).
  ValidationLimits small_pool = Limits(&tokenizer);
  small_pool.kv_pool_tokens = 40;
  out = ToEngineRequest(request, small_pool);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->stopping.max_tokens, 31);
  // One the prompt exactly fills: one token.
  small_pool.kv_pool_tokens = 10;
  out = ToEngineRequest(request, small_pool);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->stopping.max_tokens, 1);
  // One the prompt does not fit: refused naming the prompt and the pool (the engine's refusal
  // spoke of a max_tokens the client had not sent, and told it to lower it).
  small_pool.kv_pool_tokens = 9;
  const absl::Status too_long = ToEngineRequest(request, small_pool).status();
  ExpectInvalid(too_long, "prompt: 10 prompt tokens do not fit in the KV pool of 9 tokens");
  EXPECT_EQ(too_long.message().find("max_tokens"), absl::string_view::npos) << too_long;
  // An explicit max_tokens within the context but past the pool: refused naming the field
  // (the engine's refusal named no field). 10 + 31 - 1 = 40 slots fit a pool of 40, 41 do not.
  small_pool.kv_pool_tokens = 40;
  request.mutable_stopping()->set_max_tokens(31);
  out = ToEngineRequest(request, small_pool);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->stopping.max_tokens, 31);
  request.mutable_stopping()->set_max_tokens(32);
  ExpectInvalid(ToEngineRequest(request, small_pool).status(),
                "stopping.max_tokens: 10 prompt tokens + max_tokens 32 need 41 KV slots but the "
                "KV pool holds 40 tokens");
  request.mutable_stopping()->clear_max_tokens();
  out = ToEngineRequest(request, Limits(&tokenizer));  // the rest of this test's request
  EXPECT_FLOAT_EQ(out->sampling.temperature, 0.5f);
  EXPECT_EQ(out->sampling.seed, std::optional<uint64_t>(7));
  EXPECT_FLOAT_EQ(out->sampling.top_p, 1.0f);  // unset: the default
  EXPECT_EQ(out->stopping.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(out->priority, 3);
  EXPECT_EQ(out->latency_budget, absl::Milliseconds(250));
}

}  // namespace
}  // namespace rtgen
