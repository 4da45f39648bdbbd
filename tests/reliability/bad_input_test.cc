// Bad input over the wire, beyond tests/server/invalid_request_test.cc: absurd and NaN sampling
// values, stop-string limits, chat and token-id edge cases, invalid UTF-8 inside messages and
// stop strings, and a message larger than the server's receive limit. Each gets its status code
// and (where our code sees it) a message naming the field; after each the server is healthy,
// idle and still generates.

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct BadCase {
  std::string name;
  absl::StatusCode code;
  std::string in_message;  // must appear in the error message ("" = not checked)
  std::function<void(v1::GenerateRequest&)> edit;
};

void AddMessage(v1::GenerateRequest& r, const std::string& role, const std::string& text) {
  v1::ChatMessage* m = r.mutable_messages()->add_messages();
  m->set_role(role);
  m->set_content(text);
}

std::vector<BadCase> BadCases(int max_model_len) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  std::string long_text;
  for (int i = 0; i < max_model_len; ++i) long_text += " word";
  return {
      {"temperature 1e9", kInvalid, "sampling.temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(1e9f); }},
      {"temperature NaN", kInvalid, "sampling.temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(kNaN); }},
      {"temperature inf", kInvalid, "sampling.temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(INFINITY); }},
      {"top_k -5", kInvalid, "sampling.top_k",
       [](auto& r) { r.mutable_sampling()->set_top_k(-5); }},
      {"top_p NaN", kInvalid, "sampling.top_p",
       [](auto& r) { r.mutable_sampling()->set_top_p(kNaN); }},
      {"top_p 1.5", kInvalid, "sampling.top_p",
       [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }},
      {"min_p 2", kInvalid, "sampling.min_p",
       [](auto& r) { r.mutable_sampling()->set_min_p(2.0f); }},
      {"min_p -0.1", kInvalid, "sampling.min_p",
       [](auto& r) { r.mutable_sampling()->set_min_p(-0.1f); }},
      {"repetition_penalty 1e9", kInvalid, "sampling.repetition_penalty",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(1e9f); }},
      {"repetition_penalty -1", kInvalid, "sampling.repetition_penalty",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(-1.0f); }},
      {"presence_penalty NaN", kInvalid, "sampling.presence_penalty",
       [](auto& r) { r.mutable_sampling()->set_presence_penalty(kNaN); }},
      {"frequency_penalty 1e9", kInvalid, "sampling.frequency_penalty",
       [](auto& r) { r.mutable_sampling()->set_frequency_penalty(1e9f); }},
      {"max_tokens -1", kInvalid, "stopping.max_tokens",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(-1); }},
      {"max_tokens INT_MAX", kInvalid, "stopping.max_tokens",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(std::numeric_limits<int32_t>::max()); }},
      {"17 stop strings", kInvalid, "stopping.stop",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.mutable_stopping()->add_stop(absl::StrCat("s", i));
       }},
      {"300-byte stop string", kInvalid, "stopping.stop[1]",
       [](auto& r) {
         r.mutable_stopping()->add_stop("ok");
         r.mutable_stopping()->add_stop(std::string(300, 'x'));
       }},
      {"negative token id", kInvalid, "prompt_token_ids.ids[0]",
       [](auto& r) { r.mutable_prompt_token_ids()->add_ids(-1); }},
      {"token ids beyond the context", kInvalid, "prompt_token_ids",
       [max_model_len](auto& r) {
         for (int i = 0; i < max_model_len; ++i) r.mutable_prompt_token_ids()->add_ids(42);
       }},
      {"messages beyond the context", kInvalid, "messages",
       [long_text](auto& r) { AddMessage(r, "user", long_text); }},
      // Encoded only as far as four contexts of tokens (request_validation.h).
      {"prompt of 900 KiB", kInvalid, "prompt: more than",
       [](auto& r) {
         std::string text;
         while (text.size() < (900 << 10)) text += " word";
         r.set_prompt(text);
       }},
      {"empty role", kInvalid, "messages[0].role",
       [](auto& r) { AddMessage(r, "", "hi"); }},
      {"role in capitals", kInvalid, "messages[1].role",
       [](auto& r) {
         AddMessage(r, "system", "be brief");
         AddMessage(r, "User", "hi");
       }},
      {"request_id of 300 bytes", kInvalid, "request_id",
       [](auto& r) { r.set_request_id(std::string(300, 'r')); }},
      {"logprobs -1", kInvalid, "logprobs", [](auto& r) { r.set_logprobs(-1); }},
      // Invalid UTF-8 reaches our validation: Generate parses its request itself
      // (server/raw_message.h), so the answer names the field.
      {"invalid UTF-8 in a message", kInvalid, "messages[0].content",
       [](auto& r) { AddMessage(r, "user", "caf\xC3("); }},
      {"invalid UTF-8 in a stop string", kInvalid, "stopping.stop[0]",
       [](auto& r) { r.mutable_stopping()->add_stop("\xFF\xFE"); }},
      {"invalid UTF-8 in the request id", kInvalid, "request_id",
       [](auto& r) { r.set_request_id("id \xC3"); }},
      // Above the server's max receive size (ServerConfig::max_message_bytes, set to 1 MiB).
      {"2 MiB prompt", absl::StatusCode::kResourceExhausted, "larger than max",
       [](auto& r) { r.set_prompt(std::string(2 << 20, 'a')); }},
  };
}

void ExpectHealthy(InferenceClient& client, const std::string& after) {
  absl::StatusOr<HealthStatus> health = client.Health();
  ASSERT_TRUE(health.ok()) << after << ": " << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing) << after;
  v1::Load idle = WaitForIdle(client, absl::Seconds(5));
  EXPECT_EQ(idle.running(), 0) << after;
  EXPECT_EQ(idle.waiting(), 0) << after;
  EXPECT_EQ(idle.kv_blocks_free(), idle.kv_blocks_total()) << after;
}

TEST(BadInputTest, EachIsRefusedWithItsCodeAndTheServerStaysHealthy) {
  ServerConfig config = SmallServerConfig();
  config.max_message_bytes = 1 << 20;
  RunningServer server = StartServer(config);
  InferenceClient& client = *server.client;
  for (const BadCase& bad : BadCases(config.engine.max_model_len)) {
    v1::GenerateRequest request;
    request.set_prompt("Hello");
    request.mutable_stopping()->set_max_tokens(4);
    bad.edit(request);
    absl::StatusOr<GenerateResult> result = client.Generate(request);
    ASSERT_FALSE(result.ok()) << bad.name << " was accepted";
    EXPECT_EQ(result.status().code(), bad.code) << bad.name << ": " << result.status();
    EXPECT_NE(result.status().message().find(bad.in_message), absl::string_view::npos)
        << bad.name << ": '" << result.status().message() << "' does not name "
        << bad.in_message;
    std::printf("[figure] %-32s -> %s: %s\n", bad.name.c_str(),
                absl::StatusCodeToString(result.status().code()).c_str(),
                std::string(result.status().message().substr(0, 110)).c_str());
    ExpectHealthy(client, bad.name);
  }
  v1::GenerateRequest good;
  good.set_prompt("Hello");
  good.mutable_stopping()->set_max_tokens(3);
  good.mutable_stopping()->set_ignore_eos(true);
  absl::StatusOr<GenerateResult> result = client.Generate(good);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->token_ids.size(), 3u);
}

}  // namespace
}  // namespace rtgen::reliability
