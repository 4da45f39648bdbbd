// A client that stops reading while its stream is generated: the server merges the chunks the
// client has not taken into fewer messages, but never past GenerateReactor::kMaxCoalescedBytes,
// so a long stream with logprobs reaches a stalled client as messages far under gRPC's 4 MiB
// receive limit, with every token, in order.

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "rtgen/v1/inference.grpc.pb.h"
#include "server/generate_reactor.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

constexpr int kMaxTokens = 2000;
constexpr int kLogprobs = 20;  // ~200 encoded bytes a token: ~400 KB in all

TEST(SlowReaderTest, AStalledClientGetsTheStreamInBoundedMessages) {
  ServerConfig config = SmallServerConfig();
  config.engine.max_model_len = 4096;
  RunningServer running = StartServer(config);

  // A small flow-control window that does not grow, so the server's writes stall at once.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 * 1024);
  auto channel =
      grpc::CreateCustomChannel(running.target, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Inference::NewStub(channel);

  v1::GenerateRequest request;
  request.set_request_id("slow-reader");
  request.set_prompt("Once upon a time");
  request.set_logprobs(kLogprobs);
  request.mutable_stopping()->set_max_tokens(kMaxTokens);
  request.mutable_stopping()->set_ignore_eos(true);
  request.mutable_sampling()->set_seed(7);

  const double finished_before = FinishedCount(*running.server, "length");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  // Read nothing until the engine has generated the whole stream.
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  while (FinishedCount(*running.server, "length") <= finished_before && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(FinishedCount(*running.server, "length"), finished_before)
      << "the engine did not finish the stream";

  v1::GenerateResponse response;
  int messages = 0;
  int tokens = 0;
  int logprob_entries = 0;
  size_t largest = 0;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&response)) {
    ++messages;
    tokens += response.token_ids_size();
    logprob_entries += response.logprobs_size();
    largest = std::max(largest, response.ByteSizeLong());
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finish = response.finish_reason();
    }
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, kMaxTokens);
  EXPECT_EQ(logprob_entries, kMaxTokens);
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);
  // A merged message holds whole chunks up to the cap; the estimate (the chunks' own encoded
  // sizes) leaves out at most a few bytes of framing a chunk.
  EXPECT_LE(largest, GenerateReactor::kMaxCoalescedBytes + 4096) << messages << " messages";
  // The stall merged chunks (far fewer messages than tokens), so the cap was what bounded them.
  EXPECT_LT(messages, kMaxTokens / 4);
  std::printf("[figure] slow reader: %d tokens with %d logprobs in %d messages, largest %zu B\n",
              tokens, kLogprobs, messages, largest);
}

}  // namespace
}  // namespace rtgen::reliability
