// A client whose path goes silent mid-stream, without a reset (a NAT entry dropped, a frozen
// VM: FreezingProxy): with keepalive the server's ping goes unanswered, it closes the connection,
// cancels the request and frees its KV blocks within keepalive time + timeout; without (gRPC's
// two hours) the request runs on, holding its blocks, to its end (or until TCP gives up, minutes
// later). The stream is 2000 tokens of the tiny synthetic model, ~1 s: the keepalive here is
// 150 ms + 150 ms.

#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/reliability/freezing_proxy.h"
#include "tests/reliability/stream_call.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

struct Silenced {
  v1::Load at_freeze;          // the server's load when the path went silent
  v1::Load after;              // WaitForIdle's last reading
  double seconds = 0.0;        // from the freeze to `after`
  double cancelled_added = 0;  // rtgen_requests_total{finish_reason="cancelled"} since the start
  double length_added = 0;     // ... {finish_reason="length"}
};

// Starts a 2000-token stream through a FreezingProxy to a server with the given keepalive, waits
// until it runs, silences the path, then waits up to `wait` for the server to go idle.
Silenced SilenceAStream(absl::Duration keepalive_time, absl::Duration wait) {
  ServerConfig config = SmallServerConfig();
  config.engine.max_model_len = 2048;
  config.engine.num_kv_blocks = 512;
  config.keepalive_time = keepalive_time;
  config.keepalive_timeout = absl::Milliseconds(150);
  RunningServer server = StartServer(config);
  absl::StatusOr<std::unique_ptr<FreezingProxy>> proxy =
      FreezingProxy::Start(server.server->port());
  EXPECT_TRUE(proxy.ok()) << proxy.status();
  if (!proxy.ok()) return {};
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*proxy)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  v1::GenerateRequest request;
  request.set_request_id("silent");
  request.set_prompt("Once upon a time");
  request.mutable_stopping()->set_max_tokens(2000);
  request.mutable_stopping()->set_ignore_eos(true);
  const double cancelled_before = FinishedCount(*server.server, "cancelled");
  const double length_before = FinishedCount(*server.server, "length");
  StreamCall call(stub.get(), request);
  call.Start();
  Silenced out;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    absl::StatusOr<v1::Load> load = server.client->GetLoad();
    if (load.ok() && load->running() == 1) {
      out.at_freeze = *load;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(50));  // tokens flow through the proxy
  (*proxy)->Freeze();
  const absl::Time frozen = absl::Now();
  out.after = WaitForIdle(*server.client, wait);
  out.seconds = absl::ToDoubleSeconds(absl::Now() - frozen);
  out.cancelled_added = FinishedCount(*server.server, "cancelled") - cancelled_before;
  out.length_added = FinishedCount(*server.server, "length") - length_before;
  proxy->reset();  // the client's connection closes: its call ends
  EXPECT_TRUE(call.Wait(absl::Seconds(10)));
  return out;
}

TEST(SilentClientTest, KeepaliveCancelsASilentClientsStreamAndFreesItsBlocks) {
  const Silenced s = SilenceAStream(absl::Milliseconds(150), absl::Seconds(15));
  EXPECT_EQ(s.at_freeze.running(), 1);
  EXPECT_EQ(s.after.running(), 0) << "still running " << s.seconds << " s after the silence";
  EXPECT_EQ(s.after.kv_blocks_free(), s.after.kv_blocks_total());
  EXPECT_EQ(s.cancelled_added, 1);
  std::printf("[figure] a client silenced mid-stream (keepalive 150 ms + timeout 150 ms): "
              "cancelled and idle %.3f s later\n",
              s.seconds);
}

// The control: without the server's keepalive the same silence cancels nothing: the stream runs
// to its end (so the test above measures keepalive, not something else closing the connection).
TEST(SilentClientTest, WithoutKeepaliveTheSilentStreamRunsToItsEnd) {
  const Silenced s = SilenceAStream(absl::ZeroDuration(), absl::Seconds(30));
  EXPECT_EQ(s.at_freeze.running(), 1);
  EXPECT_EQ(s.after.running(), 0);
  EXPECT_EQ(s.cancelled_added, 0);
  EXPECT_EQ(s.length_added, 1);
}

}  // namespace
}  // namespace rtgen::reliability
