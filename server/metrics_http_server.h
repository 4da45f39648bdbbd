#pragma once
// A minimal HTTP/1.1 server for Prometheus scrapes: GET /metrics answers the text exposition
// format produced by a callback; anything else gets 404 (or 405 for other methods). One thread,
// one connection at a time, `Connection: close` — enough for scrapers, and it keeps rtgen free of
// an embedded web server (civetweb, under prometheus-cpp's Exposer, fails to start in a process
// that also loads cuBLASLt).

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace rtgen {

class MetricsHttpServer {
 public:
  using RenderFn = std::function<std::string()>;
  // Binds host:port (port 0: a free port) and starts serving. `render` runs on the server thread.
  // Host "" or "::": every address, IPv6 and IPv4 on one socket (IPv4's alone on a host without
  // IPv6).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                   RenderFn render);
  ~MetricsHttpServer();  // stops the thread and closes the socket
  int port() const { return port_; }

 private:
  MetricsHttpServer(int fd, int port, RenderFn render);
  void Serve();
  void HandleConnection(int client) const;

  int fd_;
  int port_;
  RenderFn render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rtgen
