// Where the server listens: a gRPC or /metrics port outside [0, 65535] is refused at start-up
// naming the flag (the resolver would take it modulo 65536 and quietly serve another port), a
// bare IPv6 host (--host=::1) is bracketed for gRPC, which otherwise reads "::1:50051" as a host
// without a port, and /metrics follows --host unless --metrics-host names its own.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/metrics_http_server.h"
#include "server/server.h"
#include "tests/reliability/synthetic_server.h"

namespace rtgen::reliability {
namespace {

TEST(ListenAddressTest, PortsOutsideTheRangeAreRefusedNamingTheFlag) {
  for (int port : {-1, 65536, 70000}) {
    ServerConfig config = SmallServerConfig();
    config.port = port;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
    ASSERT_FALSE(server.ok()) << "port " << port << " was taken";
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(server.status().message().find("port:"), absl::string_view::npos)
        << server.status();
  }
  ServerConfig config = SmallServerConfig();
  config.metrics_port = 65536;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
  ASSERT_FALSE(server.ok()) << "metrics port 65536 was taken";
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("metrics-port:"), absl::string_view::npos)
      << server.status();
  auto metrics = MetricsHttpServer::Start("127.0.0.1", 70000, [] { return std::string(); });
  ASSERT_FALSE(metrics.ok()) << "the metrics server took port 70000 (as 4464)";
  EXPECT_NE(metrics.status().message().find("metrics-port:"), absl::string_view::npos);
}

TEST(ListenAddressTest, BareIpv6HostsAreBracketed) {
  EXPECT_EQ(GrpcListenAddress("::", 50051), "[::]:50051");
  EXPECT_EQ(GrpcListenAddress("::1", 0), "[::1]:0");
  EXPECT_EQ(GrpcListenAddress("[::1]", 7), "[::1]:7");
  EXPECT_EQ(GrpcListenAddress("0.0.0.0", 50051), "0.0.0.0:50051");
  EXPECT_EQ(GrpcListenAddress("localhost", 1), "localhost:1");
  EXPECT_EQ(GrpcListenAddress("fe80::1%eth0", 2), "[fe80::1%eth0]:2");
  EXPECT_EQ(GrpcListenAddress("::ffff:127.0.0.1", 3), "[::ffff:127.0.0.1]:3");
  EXPECT_EQ(GrpcListenAddress("unix:/tmp/socket", 4), "unix:/tmp/socket:4");  // not IPv6
}

TEST(ListenAddressTest, MetricsFollowTheGrpcHostUnlessNamed) {
  ServerConfig config;
  for (const auto& [host, want] : std::vector<std::pair<std::string, std::string>>{
           {"0.0.0.0", ""}, {"::", ""}, {"[::]", ""}, {"", ""}, {"127.0.0.1", "127.0.0.1"},
           {"::1", "::1"}, {"[::1]", "::1"}, {"fe80::1%eth0", "fe80::1%eth0"},
           {"localhost", "127.0.0.1"},
           // Not an address a socket binds: every address, as before --metrics-host.
           {"rtgen.example", ""}, {"unix:/tmp/rtgen.sock", ""}}) {
    config.host = host;
    EXPECT_EQ(MetricsListenHost(config), want) << "--host=" << host;
  }
  config.host = "127.0.0.1";
  config.metrics_host = "0.0.0.0";  // named: as given (IPv4's wildcard alone)
  EXPECT_EQ(MetricsListenHost(config), "0.0.0.0");
  config.metrics_host = "[::1]";
  EXPECT_EQ(MetricsListenHost(config), "::1");
}

// Whether `address` accepts a connection on `port`.
bool Accepts(const char* address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address, &addr.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(ListenAddressTest, MetricsStayOnTheLoopbackHostTheServerWasGiven) {
  // --host=127.0.0.1 kept gRPC on the loopback while /metrics (no --metrics-host) listened on
  // every address. 127.0.0.2 reaches this machine's loopback too, but not a socket bound to
  // 127.0.0.1.
  ServerConfig config = SmallServerConfig();
  config.metrics_port = 0;
  RunningServer running = StartServer(config);
  const int port = running.server->metrics_port();
  EXPECT_TRUE(Accepts("127.0.0.1", port)) << "no /metrics on 127.0.0.1:" << port;
  EXPECT_FALSE(Accepts("127.0.0.2", port)) << "/metrics answered on 127.0.0.2:" << port;
}

// Whether this machine has the IPv6 loopback (a container may have IPv6 off).
bool HasIpv6Loopback() {
  std::ifstream interfaces("/proc/net/if_inet6");
  std::string address;
  while (interfaces >> address) {
    if (address == "00000000000000000000000000000001") return true;
    std::string rest;
    std::getline(interfaces, rest);
  }
  return false;
}

TEST(ListenAddressTest, ServesOnABareIpv6Host) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  ServerConfig config = SmallServerConfig();
  config.host = "::1";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = InferenceClient::Connect(absl::StrCat("[::1]:", (*server)->port()));
  absl::StatusOr<HealthStatus> health = client->Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
}

}  // namespace
}  // namespace rtgen::reliability
