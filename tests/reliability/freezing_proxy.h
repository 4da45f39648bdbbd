#pragma once
// A TCP proxy on 127.0.0.1 for one connection that can go silent: until Freeze() it forwards
// bytes both ways between its client and a port on 127.0.0.1; after, it forwards nothing and
// answers nothing, yet keeps both sockets open (no FIN, no reset), as a path through a NAT entry
// that expired or to a frozen VM looks to the server.

#include <atomic>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace rtgen::reliability {

class FreezingProxy {
 public:
  // Listens on an ephemeral port of 127.0.0.1; the first connection accepted is forwarded to
  // 127.0.0.1:target_port.
  static absl::StatusOr<std::unique_ptr<FreezingProxy>> Start(int target_port);
  ~FreezingProxy();  // stops forwarding and closes every socket

  int port() const { return port_; }
  // Stops forwarding in both directions (bytes already forwarded stay delivered).
  void Freeze() { frozen_.store(true); }

 private:
  FreezingProxy(int listen_fd, int port, int target_port);
  void Run();  // the forwarding thread

  const int listen_fd_;
  const int port_;
  const int target_port_;
  std::atomic<bool> frozen_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rtgen::reliability
