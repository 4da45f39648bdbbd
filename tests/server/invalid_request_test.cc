// Every bad GenerateRequest is refused with INVALID_ARGUMENT naming the field, over the wire,
// and the server keeps serving afterwards.

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/server/test_server.h"

namespace rtgen {
namespace {

using testing::SharedServer;

struct BadCase {
  std::string name;
  std::string field;  // must appear in the error message
  std::function<void(v1::GenerateRequest&)> edit;
};

void UserMessage(v1::GenerateRequest& r, const std::string& role, const std::string& text) {
  v1::ChatMessage* m = r.mutable_messages()->add_messages();
  m->set_role(role);
  m->set_content(text);
}

std::vector<BadCase> BadCases() {
  std::string long_prompt;
  for (int i = 0; i < testing::kMaxModelLen; ++i) long_prompt += " word";
  return {
      {"no input", "input", [](auto& r) { r.clear_prompt(); }},
      {"empty prompt", "prompt", [](auto& r) { r.set_prompt(""); }},
      {"empty messages", "messages", [](auto& r) { r.mutable_messages(); }},
      {"unknown role", "messages[1].role: unknown role 'wizard'",
       [](auto& r) {
         UserMessage(r, "user", "hi");
         UserMessage(r, "wizard", "abracadabra");
       }},
      // Echoed in full, 64 KiB in the trailer passed the client's header limit: the answer
      // became RESOURCE_EXHAUSTED instead of naming the field.
      {"64 KiB unknown role", "messages[0].role: unknown role 'xxxx",
       [](auto& r) { UserMessage(r, std::string(64 << 10, 'x'), "hi"); }},
      {"empty token ids", "prompt_token_ids", [](auto& r) { r.mutable_prompt_token_ids(); }},
      {"token id out of range", "prompt_token_ids.ids[1]",
       [](auto& r) {
         r.mutable_prompt_token_ids()->add_ids(1);
         r.mutable_prompt_token_ids()->add_ids(10'000'000);
       }},
      {"prompt longer than the context", "prompt",
       [long_prompt](auto& r) { r.set_prompt(long_prompt); }},
      {"negative temperature", "sampling.temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(-1.0f); }},
      {"top_p zero", "sampling.top_p", [](auto& r) { r.mutable_sampling()->set_top_p(0.0f); }},
      {"top_k beyond vocab", "sampling.top_k",
       [](auto& r) { r.mutable_sampling()->set_top_k(10'000'000); }},
      {"min_p above one", "sampling.min_p",
       [](auto& r) { r.mutable_sampling()->set_min_p(1.5f); }},
      {"repetition penalty zero", "sampling.repetition_penalty",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); }},
      {"presence penalty", "sampling.presence_penalty",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(3.0f); }},
      {"frequency penalty", "sampling.frequency_penalty",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(-3.0f); }},
      {"max_tokens zero", "stopping.max_tokens",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(0); }},
      {"max_tokens beyond the context", "stopping.max_tokens",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(testing::kMaxModelLen * 4); }},
      {"empty stop string", "stopping.stop[0]",
       [](auto& r) { r.mutable_stopping()->add_stop(""); }},
      {"stop token out of range", "stopping.stop_token_ids[0]",
       [](auto& r) { r.mutable_stopping()->add_stop_token_ids(-5); }},
      {"100000 stop token ids", "stopping.stop_token_ids: has 100000 ids, at most 256",
       [](auto& r) {
         for (int i = 0; i < 100000; ++i) r.mutable_stopping()->add_stop_token_ids(16);
       }},
      {"too many logprobs", "logprobs", [](auto& r) { r.set_logprobs(50); }},
      {"zero latency budget", "latency_budget_ms", [](auto& r) { r.set_latency_budget_ms(0); }},
  };
}

TEST(InvalidRequestTest, EveryBadInputIsInvalidArgumentNamingTheField) {
  auto& client = *SharedServer().client;
  for (const BadCase& bad : BadCases()) {
    v1::GenerateRequest request;
    request.set_prompt("Hello");
    request.mutable_stopping()->set_max_tokens(4);
    bad.edit(request);
    absl::StatusOr<GenerateResult> result = client.Generate(request);
    ASSERT_FALSE(result.ok()) << bad.name << " was accepted";
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.name << ": " << result.status();
    EXPECT_NE(result.status().message().find(bad.field), absl::string_view::npos)
        << bad.name << ": '" << result.status().message() << "' does not name " << bad.field;
  }
  // Still serving.
  v1::GenerateRequest good;
  good.set_prompt("Hello");
  good.mutable_stopping()->set_max_tokens(2);
  absl::StatusOr<GenerateResult> result = client.Generate(good);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->token_ids.size(), 1u);
}

TEST(InvalidRequestTest, BadTokenizeInputIsInvalidArgument) {
  auto& client = *SharedServer().client;
  v1::TokenizeRequest request;
  absl::StatusOr<v1::TokenizeResponse> none = client.Tokenize(request);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("input"), absl::string_view::npos);

  v1::ChatMessage* m = request.mutable_messages()->add_messages();
  m->set_role("narrator");
  m->set_content("x");
  absl::StatusOr<v1::TokenizeResponse> role = client.Tokenize(request);
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(role.status().message().find("messages[0].role"), absl::string_view::npos)
      << role.status();
}

}  // namespace
}  // namespace rtgen

namespace rtgen {
namespace {

// Invalid UTF-8 in any text field reaches our validation (Generate and Tokenize are raw methods:
// server/raw_message.h) and is answered INVALID_ARGUMENT naming the field; the server keeps serving.
void ExpectInvalidUtf8Named(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(field), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("UTF-8"), absl::string_view::npos) << status;
}

TEST(InvalidRequestTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  auto& client = *testing::SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("caf\xC3(");
  request.mutable_stopping()->set_max_tokens(2);
  ExpectInvalidUtf8Named(client.Generate(request).status(), "prompt");

  v1::GenerateRequest chat;
  chat.mutable_stopping()->set_max_tokens(2);
  auto* first = chat.mutable_messages()->add_messages();
  first->set_role("system");
  first->set_content("be brief");
  auto* second = chat.mutable_messages()->add_messages();
  second->set_role("user");
  second->set_content("overlong \xC0\xAF");
  ExpectInvalidUtf8Named(client.Generate(chat).status(), "messages[1].content");

  v1::GenerateRequest stop = request;
  stop.set_prompt("hello");
  stop.mutable_stopping()->add_stop("ok");
  stop.mutable_stopping()->add_stop("\xFF\xFE");
  ExpectInvalidUtf8Named(client.Generate(stop).status(), "stopping.stop[1]");

  v1::GenerateRequest id = request;
  id.set_prompt("hello");
  id.set_request_id("surrogate \xED\xA0\x80");
  ExpectInvalidUtf8Named(client.Generate(id).status(), "request_id");

  v1::TokenizeRequest tokenize;
  tokenize.set_prompt("\xE2\x82");
  ExpectInvalidUtf8Named(client.Tokenize(tokenize).status(), "prompt");

  request.set_prompt("caf\xC3\xA9");
  EXPECT_TRUE(client.Generate(request).ok());
  tokenize.set_prompt("caf\xC3\xA9");
  EXPECT_TRUE(client.Tokenize(tokenize).ok());
}

}  // namespace
}  // namespace rtgen
