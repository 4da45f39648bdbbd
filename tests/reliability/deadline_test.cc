// Deadlines on the synthetic model: one that expires while the request waits in the queue
// (behind streams holding every sequence slot) and one that expires mid-stream. Both end with
// DEADLINE_EXCEEDED, the engine drops them at its next step, their KV blocks come back, and the
// metrics count them as deadlines, not as cancels (gRPC also cancels a call whose deadline
// passes, and that cancel used to reach the engine first).

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/reliability/stream_call.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

v1::GenerateRequest LongRequest(const std::string& id, int max_tokens) {
  v1::GenerateRequest request;
  request.set_prompt(absl::StrCat("Tell the long story of ", id, ", the wandering knight."));
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  request.set_request_id(id);
  return request;
}

ServerConfig TwoSlotConfig() {
  ServerConfig config = SmallServerConfig();
  config.engine.max_num_seqs = 2;
  config.engine.max_model_len = 2048;
  config.engine.num_kv_blocks = 512;
  return config;
}

TEST(DeadlineTest, ExpiresInTheQueueWhileOthersRun) {
  RunningServer server = StartServer(TwoSlotConfig());
  auto stub =
      v1::Inference::NewStub(grpc::CreateChannel(server.target, grpc::InsecureChannelCredentials()));
  // Two long streams hold both sequence slots for seconds.
  std::vector<std::unique_ptr<StreamCall>> blockers;
  for (int i = 0; i < 2; ++i) {
    blockers.push_back(std::make_unique<StreamCall>(
        stub.get(), LongRequest(absl::StrCat("blocker-", i), 2000)));
    blockers.back()->Start();
  }
  // Wait until both run, so the next request can only queue.
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (absl::Now() < until) {
    absl::StatusOr<v1::Load> load = server.client->GetLoad();
    if (load.ok() && load->running() == 2) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  StreamCall queued(stub.get(), LongRequest("queued", 8), -1, absl::Milliseconds(300));
  queued.Start();
  ASSERT_TRUE(queued.Wait(absl::Seconds(10)));
  EXPECT_EQ(queued.status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << queued.status().error_message();
  EXPECT_EQ(queued.tokens(), 0);
  // The server dropped it from its queue on its own (the blockers still run).
  absl::StatusOr<v1::Load> load;
  const absl::Time drop_by = absl::Now() + absl::Seconds(5);
  do {
    absl::SleepFor(absl::Milliseconds(20));
    load = server.client->GetLoad();
    ASSERT_TRUE(load.ok()) << load.status();
  } while (load->waiting() != 0 && absl::Now() < drop_by);
  EXPECT_EQ(load->waiting(), 0);
  EXPECT_EQ(load->running(), 2);
  std::printf("[figure] queued request, 300 ms deadline behind 2 running streams: %s; "
              "waiting afterwards %d\n",
              queued.status().error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                  ? "DEADLINE_EXCEEDED"
                  : "other",
              load->waiting());
  // Cancel the blockers rather than wait for their tokens; everything comes back.
  for (auto& blocker : blockers) blocker->Cancel();
  for (auto& blocker : blockers) ASSERT_TRUE(blocker->Wait(absl::Seconds(10)));
  v1::Load idle = WaitForIdle(*server.client);
  EXPECT_EQ(idle.running(), 0);
  EXPECT_EQ(idle.kv_blocks_free(), idle.kv_blocks_total());
  EXPECT_EQ(FinishedCount(*server.server, "deadline"), 1);
  EXPECT_EQ(FinishedCount(*server.server, "cancelled"), 2);  // the blockers
}

TEST(DeadlineTest, ExpiresMidStreamAndFreesItsBlocks) {
  RunningServer server = StartServer(TwoSlotConfig());
  auto stub =
      v1::Inference::NewStub(grpc::CreateChannel(server.target, grpc::InsecureChannelCredentials()));
  const absl::Time start = absl::Now();
  StreamCall call(stub.get(), LongRequest("mid-stream", 2000), -1, absl::Milliseconds(800));
  call.Start();
  ASSERT_TRUE(call.Wait(absl::Seconds(20)));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  EXPECT_EQ(call.status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << call.status().error_message();
  EXPECT_GT(call.tokens(), 0) << "the deadline should expire after some tokens";
  EXPECT_LT(call.tokens(), 2000);
  v1::Load idle = WaitForIdle(*server.client);
  std::printf("[figure] 800 ms deadline mid-stream: %d tokens then DEADLINE_EXCEEDED after "
              "%.2f s; running %d, kv free %d/%d\n",
              call.tokens(), seconds, idle.running(), idle.kv_blocks_free(),
              idle.kv_blocks_total());
  EXPECT_EQ(idle.running(), 0);
  EXPECT_EQ(idle.kv_blocks_free(), idle.kv_blocks_total());
  EXPECT_EQ(FinishedCount(*server.server, "deadline"), 1);
  EXPECT_EQ(FinishedCount(*server.server, "cancelled"), 0);
}

}  // namespace
}  // namespace rtgen::reliability
