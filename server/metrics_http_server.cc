#include "server/metrics_http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rtgen {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 200;          // how often the thread checks for shutdown
// A client has this long, in all, to send its request, and again to take the answer: one
// connection is served at a time, so a client trickling bytes held every scrape (and the
// server's exit) for as long as it kept going.
constexpr int kClientBudgetMs = 2000;
constexpr size_t kMaxRequestBytes = 8192;

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Sends until done, an error, the deadline or `stop` (each send blocks for at most kPollMs: the
// socket's send timeout, set by the caller).
void SendAll(int fd, const std::string& data, Clock::time_point deadline,
             const std::atomic<bool>& stop) {
  size_t sent = 0;
  while (sent < data.size() && MsLeft(deadline) > 0 && !stop) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// An HTTP/1.1 answer; `head`: the headers alone (a HEAD request's answer has no body, RFC 9110
// 9.3.2, but says the length the body would have). `extra`: more header lines, each ending CRLF.
std::string Response(const char* status, const char* type, const std::string& body,
                     bool head = false, const char* extra = "") {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type, "\r\nContent-Length: ",
                      body.size(), "\r\n", extra, "Connection: close\r\n\r\n",
                      head ? "" : body);
}

// A socket of `family` listening on `addr`, every address family's traffic when `dual_stack`
// (an IPv6 socket with IPV6_V6ONLY off); the fd, or -errno.
int Listen(int family, const sockaddr* addr, socklen_t addr_len, bool dual_stack) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if ((dual_stack && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0) ||
      bind(fd, addr, addr_len) != 0 || listen(fd, 64) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host,
                                                                             int port,
                                                                             RenderFn render) {
  const std::string where = absl::StrCat(host, ":", port);
  // The resolver takes a numeric port modulo 65536 (htons): 65536 would bind any free port.
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics-port: must be within [0, 65535] (0: any free port), got ", port));
  }
  // Every address ("" or "::"): IPv6 and IPv4 on one socket, as gRPC's wildcard listener does
  // (bound to 0.0.0.0, an IPv6-only cluster could not scrape it); IPv4's wildcard alone where
  // the host has no IPv6.
  const bool wildcard = host.empty() || host == "::";
  int fd = -EAFNOSUPPORT;
  if (wildcard) {
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    any.sin6_port = htons(static_cast<uint16_t>(port));
    fd = Listen(AF_INET6, reinterpret_cast<sockaddr*>(&any), sizeof(any), true);
  }
  if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) {  // not tried, or no IPv6 here
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* addrs = nullptr;
    const std::string port_text = absl::StrCat(port);
    if (getaddrinfo(wildcard ? "0.0.0.0" : host.c_str(), port_text.c_str(), &hints, &addrs) != 0 ||
        addrs == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("metrics-port: cannot resolve ", where));
    }
    fd = Listen(addrs->ai_family, addrs->ai_addr, addrs->ai_addrlen, false);
    freeaddrinfo(addrs);
  }
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics-port: cannot serve /metrics on ", where, ": ", std::strerror(-fd)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, bound_port, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int fd, int port, RenderFn render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

void MetricsHttpServer::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    HandleConnection(client);
    close(client);
  }
}

void MetricsHttpServer::HandleConnection(int client) const {
  const Clock::time_point read_deadline = Clock::now() + std::chrono::milliseconds(kClientBudgetMs);
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const int left = MsLeft(read_deadline);
    if (stop_ || left == 0) return;
    pollfd p{client, POLLIN, 0};
    const int ready = poll(&p, 1, std::min(left, kPollMs));
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;
    const ssize_t n = recv(client, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string answer;
  const bool head = absl::StartsWith(request, "HEAD ");
  if (!absl::StartsWith(request, "GET ") && !head) {
    answer = Response("405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                      "Allow: GET, HEAD\r\n");
  } else {
    const size_t path_start = request.find(' ') + 1;
    const std::string path =
        request.substr(path_start, request.find(' ', path_start) - path_start);
    answer = path == "/metrics" || absl::StartsWith(path, "/metrics?")
                 ? Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_(), head)
                 : Response("404 Not Found", "text/plain", "see /metrics\n", head);
  }
  // The client's budget to take the answer starts once it is rendered.
  const timeval send_timeout{0, kPollMs * 1000};
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  SendAll(client, answer,
          Clock::now() + std::chrono::milliseconds(kClientBudgetMs), stop_);
}

}  // namespace rtgen
