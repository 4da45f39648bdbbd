#include "tests/reliability/freezing_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rtgen::reliability {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Writes all of buf to fd; false when the socket fails.
bool WriteAll(int fd, const char* buf, ssize_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, buf, static_cast<size_t>(n));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    buf += w;
    n -= w;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FreezingProxy>> FreezingProxy::Start(int target_port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("proxy listen: ", error));
  }
  return std::unique_ptr<FreezingProxy>(new FreezingProxy(fd, ntohs(addr.sin_port), target_port));
}

FreezingProxy::FreezingProxy(int listen_fd, int port, int target_port)
    : listen_fd_(listen_fd), port_(port), target_port_(target_port) {
  thread_ = std::thread([this] { Run(); });
}

FreezingProxy::~FreezingProxy() {
  stop_.store(true);
  thread_.join();
  close(listen_fd_);
}

void FreezingProxy::Run() {
  int client = -1;
  while (client < 0 && !stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) > 0) client = accept(listen_fd_, nullptr, nullptr);
  }
  if (client < 0) return;
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in target = Loopback(target_port_);
  if (server < 0 || connect(server, reinterpret_cast<const sockaddr*>(&target),
                            sizeof(target)) != 0) {
    close(client);
    if (server >= 0) close(server);
    return;
  }
  // Forwards while not frozen; frozen, reads nothing (so the peers' bytes and pings go
  // unanswered) until the proxy is destroyed. A peer that closes ends the forwarding.
  char buf[1 << 16];
  bool open = true;
  while (open && !stop_.load()) {
    if (frozen_.load()) {
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (poll(fds, 2, 20) <= 0) continue;
    for (int i = 0; i < 2 && open && !frozen_.load(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      open = n > 0 && WriteAll(fds[1 - i].fd, buf, n);
    }
  }
  close(client);
  close(server);
}

}  // namespace rtgen::reliability
