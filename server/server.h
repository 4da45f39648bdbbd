#pragma once
// Wires a served model: LoadModel → backend → Engine::Create → gRPC service (+ health checking,
// reflection) and the Prometheus exposer. main.cc only turns flags into a ServerConfig.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/loader/model_loader.h"
#include "server/backend_factory.h"
#include "server/inference_service.h"
#include "server/auth.h"
#include "server/engine_health.h"
#include "server/metrics.h"
#include "server/tls.h"

namespace rtgen {

struct ServerConfig {
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  BackendOptions backend;
  std::string host = "0.0.0.0";
  int port = 50051;                 // 0: any free port (see Server::port())
  std::string metrics_host = "";    // "": the gRPC host's (MetricsListenHost)
  int metrics_port = 9090;          // 0: any free port; negative: no /metrics endpoint
  int max_connection_age_s = 0;     // > 0: close connections after this age (load balancing)
  int max_connection_age_grace_s = -1;  // streams' extra time after the age (< 0: the age)
  // Keepalive: after keepalive_time without reading from a connection the server pings it, and
  // closes it (cancelling its streams) when no answer comes within keepalive_timeout, so a client
  // whose path went silent (no reset) frees its KV blocks (zero time: gRPC's two hours).
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  TlsFiles tls;                     // empty cert: plaintext
  std::string auth_token_file;      // non-empty: bearer tokens required (health exempt)
  int max_message_bytes = 4 << 20;  // largest request message accepted
  int default_max_tokens = 256;     // an unset stopping.max_tokens; 0: the context left
  EngineConfig engine;
  std::vector<double> latency_buckets = DefaultLatencyBuckets();  // seconds
  EngineHealthPolicy engine_health;  // when failing or stuck steps turn health NOT_SERVING
  absl::Duration health_watch_interval = absl::Milliseconds(500);
};

// The address gRPC listens on: "host:port", with a bare IPv6 host bracketed ("::" becomes
// "[::]:port"; without the brackets the resolver takes the last colon's part for the host).
std::string GrpcListenAddress(const std::string& host, int port);

// The address /metrics listens on: config.metrics_host, or where that is empty the gRPC host's
// when it is an IP address, so that --host=127.0.0.1 keeps /metrics off other interfaces too;
// localhost gives 127.0.0.1. A wildcard (0.0.0.0, :: or [::], each dual-stack in gRPC), another
// name or a gRPC URI gives "": every address, IPv6 and IPv4 (metrics_http_server.h). Brackets
// around an IPv6 literal are dropped.
std::string MetricsListenHost(const ServerConfig& config);

// The checks of `config`'s own fields that Start and StartWithEngine run before anything else
// (the engine's and the backend's are theirs): each error names its flag.
absl::Status CheckServerConfig(const ServerConfig& config);

class Server {
 public:
  // Builds an engine for `tokenizer`, reporting to `observer` (tests: a fake engine).
  using EngineFactory = std::function<absl::StatusOr<std::unique_ptr<Engine>>(
      const Tokenizer* tokenizer, EngineObserver* observer)>;

  // Loads config.model_path, builds the backend and engine, and starts serving.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  // Serves `model` (tokenizer, chat template, config) with an engine from `make_engine`.
  static absl::StatusOr<std::unique_ptr<Server>> StartWithEngine(const ServerConfig& config,
                                                                 LoadedModel model,
                                                                 std::string backend_name,
                                                                 const EngineFactory& make_engine);

  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }                  // the bound gRPC port
  int metrics_port() const { return metrics_->exposer_port(); }
  Metrics& metrics() { return *metrics_; }
  Engine& engine() { return *engine_; }

  // Blocks until Shutdown completes.
  void Wait();
  // Drains: health becomes NOT_SERVING (open Watch calls end), the listener closes and every
  // connection gets GOAWAY at once, so clients take new calls elsewhere; in-flight streams get
  // `grace` to finish, what is left is cancelled, and the engine stops. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(10));

 private:
  Server() = default;
  // What the auth-token and TLS files give, read once, before the model loads (their errors
  // then cost no load).
  struct Security {
    std::unique_ptr<TokenAuthenticator> auth;  // null: no authentication
    std::shared_ptr<grpc::ServerCredentials> credentials;
  };
  static absl::StatusOr<Security> ReadSecurity(const ServerConfig& config);
  // StartWithEngine after CheckServerConfig and ReadSecurity (Start runs both before loading the
  // model).
  static absl::StatusOr<std::unique_ptr<Server>> Assemble(const ServerConfig& config,
                                                          Security security, LoadedModel model,
                                                          std::string backend_name,
                                                          const EngineFactory& make_engine);
  absl::Status StartServing(const ServerConfig& config,
                            std::shared_ptr<grpc::ServerCredentials> credentials);

  LoadedModel model_;                // tokenizer and chat template the service points into
  std::string backend_name_;
  std::unique_ptr<Metrics> metrics_;  // the engine's observer: outlives the engine
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TokenAuthenticator> auth_;  // null: no authentication
  std::unique_ptr<InferenceService> service_;
  // Registered with the server only to receive the drain's shutdown notice (Shutdown); never
  // polled for calls. Outlives grpc_server_.
  std::unique_ptr<grpc::ServerCompletionQueue> shutdown_cq_;
  std::unique_ptr<grpc::Server> grpc_server_;  // destroyed first
  int port_ = 0;
  bool shut_down_ = false;
  // Polls the engine's health (engine_health.h) and sets the health service's statuses.
  std::thread health_watch_;
  absl::Notification stop_health_watch_;
};

}  // namespace rtgen
