// Generate over a real gRPC connection against the real model: streaming, finish reason and
// usage, concurrency, seeds, cancellation and deadlines.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/server/test_server.h"
#include "tests/wait_for_idle.h"

namespace rtgen {
namespace {

using testing::SharedServer;
using testing::WaitForIdle;

v1::GenerateRequest ChatRequest(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  v1::ChatMessage* m = request.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  return request;
}

TEST(GenerateStreamTest, StreamsTokensAndTheLastMessageCarriesFinishReasonAndUsage) {
  auto& client = *SharedServer().client;
  v1::GenerateRequest request = ChatRequest("What is the capital of France?", 12);
  request.set_request_id("capital-1");
  std::vector<v1::GenerateResponse> messages;
  absl::StatusOr<GenerateResult> result =
      client.Generate(request, [&](const v1::GenerateResponse& r) { messages.push_back(r); });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(messages.empty());
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    EXPECT_EQ(messages[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED) << "message " << i;
    EXPECT_FALSE(messages[i].has_usage()) << "message " << i;
  }
  const v1::GenerateResponse& last = messages.back();
  EXPECT_TRUE(last.finish_reason() == v1::FINISH_REASON_STOP ||
              last.finish_reason() == v1::FINISH_REASON_LENGTH)
      << v1::FinishReason_Name(last.finish_reason());
  for (const auto& m : messages) EXPECT_EQ(m.request_id(), "capital-1");

  const v1::Usage& usage = last.usage();
  EXPECT_EQ(usage.generated_tokens(), static_cast<int>(result->token_ids.size()));
  EXPECT_GE(usage.generated_tokens(), 1);
  EXPECT_LE(usage.generated_tokens(), 12);
  // The prompt is what Tokenize makes of the same messages.
  v1::TokenizeRequest tokenize;
  *tokenize.mutable_messages() = request.messages();
  absl::StatusOr<v1::TokenizeResponse> tokens = client.Tokenize(tokenize);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(usage.prompt_tokens(), tokens->token_ids_size());
  EXPECT_GT(usage.total_time_seconds(), 0.0);
  EXPECT_GE(usage.total_time_seconds(), usage.time_to_first_token_seconds());
  EXPECT_GE(usage.time_to_first_token_seconds(), usage.queue_time_seconds());
  EXPECT_FALSE(result->text.empty());
  // SmolLM2-Instruct answers this one correctly even at 135M parameters.
  EXPECT_NE(result->text.find("Paris"), std::string::npos) << result->text;
}

TEST(GenerateStreamTest, RawPromptWithIgnoreEosRunsToMaxTokens) {
  auto& client = *SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("Once upon a time");
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(5);
  request.mutable_stopping()->set_ignore_eos(true);
  request.set_logprobs(2);
  int logprob_entries = 0;
  absl::StatusOr<GenerateResult> result =
      client.Generate(request, [&](const v1::GenerateResponse& r) {
        EXPECT_EQ(r.logprobs_size(), r.token_ids_size());
        for (const auto& lp : r.logprobs()) {
          EXPECT_EQ(lp.top_size(), 2);
          EXPECT_LE(lp.logprob(), 0.0f);
          ++logprob_entries;
        }
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(result->token_ids.size(), 5u);
  EXPECT_EQ(logprob_entries, 5);
  EXPECT_FALSE(result->usage.prompt_tokens() == 0);
}

// Under ignore_eos the model's end-of-turn token is generated like any other: its id is
// streamed, and its text only where the request keeps special tokens (vLLM's
// skip_special_tokens, default true).
TEST(GenerateStreamTest, EndOfTurnTextUnderIgnoreEosOnlyWhereSpecialTokensAreKept) {
  auto& client = *SharedServer().client;
  v1::TokenizeRequest im_end;
  im_end.set_prompt("<|im_end|>");
  absl::StatusOr<v1::TokenizeResponse> im_end_ids = client.Tokenize(im_end);
  ASSERT_TRUE(im_end_ids.ok()) << im_end_ids.status();
  ASSERT_EQ(im_end_ids->token_ids_size(), 1);
  v1::GenerateRequest request = ChatRequest("What is the capital of France?", 24);
  request.mutable_stopping()->set_ignore_eos(true);
  absl::StatusOr<GenerateResult> skipped = client.Generate(request, {});
  request.set_skip_special_tokens(false);
  absl::StatusOr<GenerateResult> kept = client.Generate(request, {});
  ASSERT_TRUE(skipped.ok() && kept.ok()) << skipped.status() << " " << kept.status();
  // Greedy: the same tokens, the end of turn among them (the answer is short).
  ASSERT_EQ(skipped->token_ids, kept->token_ids);
  EXPECT_NE(std::find(kept->token_ids.begin(), kept->token_ids.end(), im_end_ids->token_ids(0)),
            kept->token_ids.end())
      << "no end of turn in 24 tokens: " << kept->text;
  EXPECT_EQ(skipped->text.find("<|im_end|>"), std::string::npos) << skipped->text;
  EXPECT_NE(kept->text.find("<|im_end|>"), std::string::npos) << kept->text;
  EXPECT_NE(skipped->text.find("Paris"), std::string::npos) << skipped->text;
}

TEST(GenerateStreamTest, LogprobsZeroGivesTheSampledTokensAloneAndUnsetNone) {
  // vLLM's logprobs = 0: each token's own log-probability without alternatives (here 0 read as
  // unset, and no log-probabilities came back).
  auto& client = *SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("Once upon a time");
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(4);
  request.mutable_stopping()->set_ignore_eos(true);
  // Greedy: the same four tokens each time; logprobs = 1's top entry is the sampled token's own.
  std::vector<float> alone, with_top;
  for (const int n : {0, -1, 1}) {  // -1: unset
    if (n >= 0) {
      request.set_logprobs(n);
    } else {
      request.clear_logprobs();
    }
    int entries = 0;
    absl::StatusOr<GenerateResult> result =
        client.Generate(request, [&](const v1::GenerateResponse& r) {
          for (int i = 0; i < r.logprobs_size(); ++i) {
            EXPECT_EQ(r.logprobs(i).token_id(), r.token_ids(i));
            EXPECT_EQ(r.logprobs(i).top_size(), n > 0 ? n : 0);
            (n == 0 ? alone : with_top).push_back(r.logprobs(i).logprob());
            if (n == 1) {
              EXPECT_EQ(r.logprobs(i).top(0).logprob(), r.logprobs(i).logprob());
            }
            ++entries;
          }
        });
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(entries, n >= 0 ? 4 : 0) << "logprobs " << n;
  }
  EXPECT_EQ(alone, with_top) << "logprobs = 0 gives the logprobs logprobs = 1 gives";
  for (const float lp : alone) EXPECT_LT(lp, 0.0f);
}

TEST(GenerateStreamTest, SameSeedGivesTheSameStream) {
  auto& client = *SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("The best game of all time is");
  request.mutable_sampling()->set_temperature(0.9f);
  request.mutable_sampling()->set_seed(1234);
  request.mutable_stopping()->set_max_tokens(8);
  request.mutable_stopping()->set_ignore_eos(true);
  absl::StatusOr<GenerateResult> first = client.Generate(request);
  absl::StatusOr<GenerateResult> second = client.Generate(request);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->token_ids, second->token_ids);
  EXPECT_EQ(first->text, second->text);
}

TEST(GenerateStreamTest, SixteenConcurrentStreamsAllComplete) {
  auto& shared = SharedServer();
  constexpr int kStreams = 16;
  constexpr int kMaxTokens = 6;
  std::vector<absl::StatusOr<GenerateResult>> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      // A channel (connection) per stream, as independent game servers would have.
      InferenceClient client(
          grpc::CreateChannel(shared.target, grpc::InsecureChannelCredentials()));
      v1::GenerateRequest request;
      request.set_request_id(absl::StrCat("concurrent-", i));
      request.set_prompt(absl::StrCat("Player ", i, " enters the dungeon and"));
      request.mutable_sampling()->set_temperature(0.0f);
      request.mutable_stopping()->set_max_tokens(kMaxTokens);
      request.mutable_stopping()->set_ignore_eos(true);
      results[i] = client.Generate(request, [i](const v1::GenerateResponse& r) {
        EXPECT_EQ(r.request_id(), absl::StrCat("concurrent-", i));
      });
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(results[i].ok()) << "stream " << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->finish_reason, v1::FINISH_REASON_LENGTH) << "stream " << i;
    EXPECT_EQ(results[i]->token_ids.size(), static_cast<size_t>(kMaxTokens)) << "stream " << i;
  }
  const v1::Load load = WaitForIdle(*shared.client, absl::Seconds(10));
  EXPECT_EQ(load.kv_blocks_free(), load.kv_blocks_total());
}

TEST(GenerateStreamTest, CancelledStreamFreesItsKvBlocks) {
  auto& client = *SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("Write a very long story about a dragon.");
  request.mutable_stopping()->set_max_tokens(400);
  request.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext context;
  std::atomic<int> messages{0};
  std::atomic<int> in_use_seen{0};  // kv blocks in use observed while streaming
  absl::StatusOr<GenerateResult> result =
      client.Generate(request, [&](const v1::GenerateResponse&) {
        if (messages.fetch_add(1) == 1) {
          absl::StatusOr<v1::Load> load = SharedServer().client->GetLoad();
          if (load.ok()) in_use_seen = load->kv_blocks_total() - load->kv_blocks_free();
          context.TryCancel();
        }
      }, &context);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  EXPECT_GT(in_use_seen.load(), 0);
  const v1::Load load = WaitForIdle(client, absl::Seconds(10));
  EXPECT_EQ(load.running(), 0);
  EXPECT_EQ(load.kv_blocks_free(), load.kv_blocks_total());
}

TEST(GenerateStreamTest, DeadlineIsHonoured) {
  auto& client = *SharedServer().client;
  v1::GenerateRequest request;
  request.set_prompt("Count from one to one thousand:");
  request.mutable_stopping()->set_max_tokens(400);
  request.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(400));
  const absl::Time start = absl::Now();
  absl::StatusOr<GenerateResult> result = client.Generate(request, {}, &context);
  const absl::Duration elapsed = absl::Now() - start;
  if (result.ok()) {
    EXPECT_EQ(result->finish_reason, v1::FINISH_REASON_DEADLINE);
  } else {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  }
  EXPECT_LT(elapsed, absl::Seconds(5));
  // The server side ended too: the blocks come back.
  const v1::Load load = WaitForIdle(client, absl::Seconds(10));
  EXPECT_EQ(load.kv_blocks_free(), load.kv_blocks_total());
}

}  // namespace
}  // namespace rtgen
