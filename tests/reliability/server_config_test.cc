// Server settings refused at start-up, naming their flag: CPU threads past any machine's cores,
// negative connection ages, ports past 65535 (before the model loads), infinite latency
// buckets, and a KV pool larger than the memory the machine has (it was zero-filled, so it
// crashed with bad_alloc or brought in the OOM killer); and --default-max-tokens reaching a
// request that sets no max_tokens.

#include <string>

#include "gtest/gtest.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

void ExpectRefused(const ServerConfig& config, const std::string& flag) {
  const absl::Status status = CheckServerConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag << ": " << status;
  EXPECT_NE(status.message().find(flag + ":"), absl::string_view::npos) << status;
}

TEST(ServerConfigTest, OutOfRangeSettingsAreRefusedNamingTheFlag) {
  ServerConfig config = SmallServerConfig();
  EXPECT_TRUE(CheckServerConfig(config).ok());
  for (const int threads : {-3, 1025, 2147483647}) {
    ServerConfig c = config;
    c.backend.threads = threads;
    ExpectRefused(c, "threads");
  }
  ServerConfig age = config;
  age.max_connection_age_s = -5;
  ExpectRefused(age, "max-connection-age-s");
  ServerConfig grace = config;
  grace.max_connection_age_grace_s = -7;
  ExpectRefused(grace, "max-connection-age-grace-s");
  grace.max_connection_age_grace_s = -1;  // the documented "the age"
  EXPECT_TRUE(CheckServerConfig(grace).ok());
  ServerConfig keepalive = config;
  keepalive.keepalive_time = absl::Seconds(-1);
  ExpectRefused(keepalive, "keepalive-time-s");
  keepalive.keepalive_time = absl::ZeroDuration();  // gRPC's default
  EXPECT_TRUE(CheckServerConfig(keepalive).ok());
  keepalive.keepalive_timeout = absl::ZeroDuration();
  ExpectRefused(keepalive, "keepalive-timeout-s");
  for (const int port : {-1, 65536, 70000}) {
    ServerConfig c = config;
    c.port = port;
    ExpectRefused(c, "port");
  }
  ServerConfig metrics = config;
  metrics.metrics_port = 90900;
  ExpectRefused(metrics, "metrics-port");
  metrics.metrics_port = -1;  // no /metrics
  EXPECT_TRUE(CheckServerConfig(metrics).ok());
  ServerConfig tokens = config;
  tokens.default_max_tokens = -1;
  ExpectRefused(tokens, "default-max-tokens");
  tokens.default_max_tokens = 0;  // the context left
  EXPECT_TRUE(CheckServerConfig(tokens).ok());
  ServerConfig message = config;
  message.max_message_bytes = 0;
  ExpectRefused(message, "max-message-bytes");
  // Before the model loads: the port, not the missing model file, is what Start reports.
  ServerConfig early = config;
  early.model_path = "/nonexistent/model.gguf";
  early.port = 70000;
  const absl::Status early_status = Server::Start(early).status();
  EXPECT_NE(early_status.message().find("port:"), absl::string_view::npos) << early_status;
  early.port = 0;
  early.auth_token_file = "/nonexistent/tokens";
  const absl::Status auth_status = Server::Start(early).status();
  EXPECT_NE(auth_status.message().find("auth-token-file:"), absl::string_view::npos)
      << auth_status;
  early.auth_token_file = "";
  early.tls.cert_path = "/nonexistent/cert.pem";  // without --tls-key
  const absl::Status tls_status = Server::Start(early).status();
  EXPECT_NE(tls_status.message().find("tls-cert"), absl::string_view::npos) << tls_status;
  // Start refuses them too, before loading the model.
  ServerConfig bad = config;
  bad.backend.threads = 5000;
  EXPECT_EQ(Server::Start(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerConfigTest, LatencyBucketsMustBeFinite) {
  for (const char* csv : {"0.1,inf", "1e400", "0.5,+Inf", "nan"}) {
    const absl::StatusOr<std::vector<double>> parsed = ParseLatencyBuckets(csv);
    ASSERT_FALSE(parsed.ok()) << csv;
    EXPECT_NE(parsed.status().message().find("latency_buckets"), absl::string_view::npos);
  }
  EXPECT_TRUE(ParseLatencyBuckets("0.005,0.1,2").ok());
}

TEST(ServerConfigTest, AKvPoolLargerThanTheMachinesMemoryIsRefused) {
  // The synthetic model's KV is 512 bytes a token: 2^20 blocks of 1024 tokens are 512 GiB (few
  // large blocks, so the block manager's own tables stay small).
  ServerConfig config = SmallServerConfig();
  config.engine.block_size = 1024;
  config.engine.num_kv_blocks = 1 << 20;
  const absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kResourceExhausted) << server.status();
  EXPECT_NE(server.status().message().find("num_kv_blocks:"), absl::string_view::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("GiB"), absl::string_view::npos) << server.status();
}

TEST(ServerConfigTest, TheDefaultMaxTokensReachesRequestsThatSetNone) {
  ServerConfig config = SmallServerConfig();
  config.default_max_tokens = 3;
  RunningServer server = StartServer(config);
  v1::GenerateRequest request;
  request.set_prompt("The default applies");
  request.mutable_stopping()->set_ignore_eos(true);
  absl::StatusOr<GenerateResult> result = server.client->Generate(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->token_ids.size(), 3u);
  EXPECT_EQ(result->finish_reason, v1::FINISH_REASON_LENGTH);
}

}  // namespace
}  // namespace rtgen::reliability
