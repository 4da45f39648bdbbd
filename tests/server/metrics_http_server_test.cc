// The /metrics HTTP server (server/metrics_http_server.h) over real sockets: it answers GET
// /metrics with the callback's text, 404 and 405 otherwise; a client that trickles its request
// byte by byte neither holds up the next scrape past its budget nor the server's shutdown.

#include "server/metrics_http_server.h"
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Sends `request` and reads the answer until the server closes, or "" after `timeout_ms`.
std::string Ask(int port, const std::string& request, int timeout_ms = 5000) {
  const int fd = Connect(port);
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      close(fd);
      return answer;
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return "";  // not answered in time
}

std::unique_ptr<MetricsHttpServer> StartServer() {
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, [] { return std::string("up 1\n"); });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// A client that sends "G" and then a byte every 300 ms until stopped (a request never ends).
class Trickler {
 public:
  explicit Trickler(int port) : fd_(Connect(port)) {
    thread_ = std::thread([this] {
      send(fd_, "G", 1, MSG_NOSIGNAL);
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        send(fd_, "E", 1, MSG_NOSIGNAL);
      }
    });
  }
  ~Trickler() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }

 private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Whether this host has an IPv6 loopback to connect through.
bool HasIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(MetricsHttpServerTest, TheDefaultHostServesIpv4AndIpv6) {
  // "" (the server's default, --host=0.0.0.0, gives it): every address. Bound to 0.0.0.0 it was
  // IPv4 only, and an IPv6-only cluster's scrapes failed while gRPC (dual-stack) answered.
  EXPECT_EQ(MetricsListenHost(ServerConfig()), "");  // the server's /metrics takes this path
  auto server = MetricsHttpServer::Start("", 0, [] { return std::string("up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(absl::StrContains(Ask((*server)->port(), "GET /metrics HTTP/1.0\r\n\r\n"), "up 1"));
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here: the IPv6 half is not checked";
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  addr.sin6_port = htons(static_cast<uint16_t>((*server)->port()));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "no /metrics on [::1]:" << (*server)->port();
  close(fd);
}

TEST(MetricsHttpServerTest, AnswersMetricsAndRefusesTheRest) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string ok = Ask(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ok.find("HTTP/1.1 200 OK"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\r\n\r\nup 1\n"), std::string::npos) << ok;
  const std::string missing = Ask(server->port(), "GET /other HTTP/1.1\r\n\r\n");
  EXPECT_NE(missing.find("404"), std::string::npos) << missing;
  const std::string post = Ask(server->port(), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_NE(post.find("405"), std::string::npos) << post;
  EXPECT_NE(post.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << post;
}

TEST(MetricsHttpServerTest, HeadGetsTheHeadersWithoutTheBody) {
  // RFC 9110 9.3.2: the answer to HEAD is GET's without its body (the length says the body's).
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string head = Ask(server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_NE(head.find("HTTP/1.1 200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: 5\r\n"), std::string::npos) << head;  // "up 1\n"
  ASSERT_GE(head.size(), 4u);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
  const std::string missing = Ask(server->port(), "HEAD /other HTTP/1.1\r\n\r\n");
  EXPECT_NE(missing.find("404"), std::string::npos) << missing;
  EXPECT_EQ(missing.find("see /metrics"), std::string::npos) << missing;
}

TEST(MetricsHttpServerTest, ATricklingClientDoesNotHoldUpTheNextScrape) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Trickler slow(server->port());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server is on `slow`
  const Clock::time_point start = Clock::now();
  const std::string ok = Ask(server->port(), "GET /metrics HTTP/1.1\r\n\r\n", 6000);
  const double waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_NE(ok.find("200 OK"), std::string::npos) << "no answer within 6 s";
  EXPECT_LT(waited_s, 3.5);  // the slow client's 2 s budget, then this scrape
}

TEST(MetricsHttpServerTest, StopsPromptlyWhileAClientTrickles) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Trickler slow(server->port());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Clock::time_point start = Clock::now();
  server.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
}

}  // namespace
}  // namespace rtgen
