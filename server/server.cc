#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <utility>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"

namespace rtgen {
namespace {

constexpr char kServiceName[] = "rtgen.v1.Inference";
// After the last Generate stream of a drain, how long other calls (a Tokenize or GetLoad reply
// being written) may still take before what is left is cancelled.
constexpr absl::Duration kOtherCallsAfterStreams = absl::Seconds(1);
// CPU backend threads beyond any machine's cores: a typo, not a setting (each one spins).
constexpr int kMaxThreads = 1024;
// The shortest interval between a client's keepalive pings that the server accepts, seconds.
constexpr int kMinClientPingS = 10;

}  // namespace

std::string GrpcListenAddress(const std::string& host, int port) {
  // An IPv6 literal: hex digits, colons and dots (an embedded IPv4), two colons at least, and
  // maybe a %zone; not a name or a URI such as unix:/path.
  const std::string address = host.substr(0, host.find('%'));
  const bool bare_ipv6 = std::count(address.begin(), address.end(), ':') >= 2 &&
                         address.find_first_not_of("0123456789abcdefABCDEF:.") == std::string::npos;
  return bare_ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

std::string MetricsListenHost(const ServerConfig& config) {
  std::string host = config.metrics_host.empty() ? config.host : config.metrics_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (!config.metrics_host.empty()) return host;
  // Following --host: its address where it is one (a socket binds one address; gRPC binds every
  // address a name resolves to), the IPv4 loopback for localhost, and every address for a
  // wildcard, another name or a gRPC URI (unix:...), as before --metrics-host.
  if (host == "0.0.0.0" || host == "::") return "";
  if (host == "localhost") return "127.0.0.1";
  const std::string address = host.substr(0, host.find('%'));
  in6_addr v6{};
  in_addr v4{};
  const bool literal = inet_pton(AF_INET, address.c_str(), &v4) == 1 ||
                       inet_pton(AF_INET6, address.c_str(), &v6) == 1;
  return literal ? host : "";
}

absl::Status CheckServerConfig(const ServerConfig& config) {
  if (config.backend.threads < 0 || config.backend.threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat("threads: must be within [0, ", kMaxThreads,
                                                   "] (0: every core), got ",
                                                   config.backend.threads));
  }
  if (config.max_connection_age_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-connection-age-s: must not be negative (0: never), got ",
                     config.max_connection_age_s));
  }
  if (config.max_connection_age_grace_s < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-connection-age-grace-s: must be -1 (the age) or more, got ",
                     config.max_connection_age_grace_s));
  }
  if (config.keepalive_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("keepalive-time-s: must not be negative (0: gRPC's default), got ",
                     absl::FormatDuration(config.keepalive_time)));
  }
  if (config.keepalive_timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat("keepalive-timeout-s: must be positive, got ",
                                                   absl::FormatDuration(config.keepalive_timeout)));
  }
  if (config.engine_health.max_failed_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unhealthy_after_failed_steps = ", config.engine_health.max_failed_steps,
        " must be at least 1"));
  }
  if (config.default_max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "default-max-tokens: must not be negative (0: the context left), got ",
        config.default_max_tokens));
  }
  if (config.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-message-bytes: must be positive, got ", config.max_message_bytes));
  }
  // The resolver takes a numeric port modulo 65536 (htons), so 70000 would quietly serve 4464.
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port: must be within [0, 65535] (0: any free port), got ", config.port));
  }
  if (config.metrics_port > 65535) {  // negative: no /metrics
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics-port: must be within [0, 65535] (0: any free port, -1: none), got ",
        config.metrics_port));
  }
  if (config.engine_health.max_stall <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unhealthy_after_stall_s = ", absl::ToInt64Seconds(config.engine_health.max_stall),
        " must be at least 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  RETURN_IF_ERROR(CheckServerConfig(config));
  ASSIGN_OR_RETURN(Security security, ReadSecurity(config));  // before the load (minutes)
  ASSIGN_OR_RETURN(const std::string backend_kind, ResolveBackendKind(config.backend.kind));
  const absl::Time load_start = absl::Now();
  absl::StatusOr<LoadedModel> model = LoadModel(config.model_path);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat("model '", config.model_path,
                                                            "': ", model.status().message()));
  }
  spdlog::info("loaded {} ({} layers, vocab {}) from {} in {:.2f} s", model->config.name,
               model->config.num_layers, model->config.vocab_size, config.model_path,
               absl::ToDoubleSeconds(absl::Now() - load_start));
  if (const int trained = model->config.max_position_embeddings;
      trained > 0 && config.engine.max_model_len > trained) {
    spdlog::warn("max-model-len {} is past the model's trained context of {} tokens: output "
                 "past it is likely to degrade",
                 config.engine.max_model_len, trained);
  }
  BackendOptions backend_options = config.backend;
  backend_options.kind = backend_kind;
  backend_options.max_num_seqs = config.engine.max_num_seqs;
  backend_options.max_num_batched_tokens = config.engine.max_num_batched_tokens;
  backend_options.max_model_len = config.engine.max_model_len;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(backend_options, *model));
  const std::string backend_name = backend->name();
  const Backend* backend_view = backend.get();  // owned by the engine, which the server owns
  // The factory runs once, inside Assemble; the backend moves into the engine.
  auto shared_backend = std::make_shared<std::unique_ptr<Backend>>(std::move(backend));
  EngineFactory make_engine = [&config, shared_backend](const Tokenizer* tokenizer,
                                                        EngineObserver* observer) {
    return Engine::Create(config.engine, std::move(*shared_backend), tokenizer, observer);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<Server> server,
                   Assemble(config, std::move(security), *std::move(model), backend_name,
                            make_engine));
  // Known label values exist from the start, at zero (dashboards and alerts see the series).
  server->metrics().PreRegisterGraphBuckets(GraphBuckets(*backend_view),
                                            PrefillGraphTokens(*backend_view));
  if (const std::string graphs = GraphCaptureSummary(*backend_view); !graphs.empty()) {
    spdlog::info("{}", graphs);
  }
  return server;
}

absl::StatusOr<std::unique_ptr<Server>> Server::StartWithEngine(const ServerConfig& config,
                                                                LoadedModel model,
                                                                std::string backend_name,
                                                                const EngineFactory& make_engine) {
  RETURN_IF_ERROR(CheckServerConfig(config));
  ASSIGN_OR_RETURN(Security security, ReadSecurity(config));
  return Assemble(config, std::move(security), std::move(model), std::move(backend_name),
                  make_engine);
}

absl::StatusOr<Server::Security> Server::ReadSecurity(const ServerConfig& config) {
  Security security;
  if (!config.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(TokenAuthenticator auth, TokenAuthenticator::FromFile(config.auth_token_file));
    security.auth = std::make_unique<TokenAuthenticator>(std::move(auth));
  }
  ASSIGN_OR_RETURN(security.credentials, MakeServerCredentials(config.tls));
  return security;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Assemble(const ServerConfig& config,
                                                         Security security, LoadedModel model,
                                                         std::string backend_name,
                                                         const EngineFactory& make_engine) {
  if (model.tokenizer == nullptr) return absl::InvalidArgumentError("model: no tokenizer");
  std::unique_ptr<Server> server(new Server());
  server->model_ = std::move(model);
  server->backend_name_ = std::move(backend_name);
  server->metrics_ = std::make_unique<Metrics>(config.latency_buckets);
  ASSIGN_OR_RETURN(server->engine_,
                   make_engine(server->model_.tokenizer.get(), server->metrics_.get()));
  server->auth_ = std::move(security.auth);
  RETURN_IF_ERROR(server->StartServing(config, std::move(security.credentials)));
  return server;
}

absl::Status Server::StartServing(const ServerConfig& config,
                                  std::shared_ptr<grpc::ServerCredentials> credentials) {
  ServedModel served;
  served.config = model_.config;
  served.backend_name = backend_name_;
  served.tokenizer = model_.tokenizer.get();
  served.chat_template = model_.chat_template.has_value() ? &*model_.chat_template : nullptr;
  service_ = std::make_unique<InferenceService>(engine_.get(), std::move(served), metrics_.get());
  if (auth_ != nullptr) service_->set_authenticator(auth_.get());
  service_->set_default_max_tokens(config.default_max_tokens);
  // /metrics first: a port it cannot bind fails start-up before gRPC listens and says SERVING.
  const std::string metrics_host = MetricsListenHost(config);
  if (config.metrics_port >= 0) {
    RETURN_IF_ERROR(metrics_->StartExposer(metrics_host, config.metrics_port));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = GrpcListenAddress(config.host, config.port);
  builder.AddListeningPort(address, credentials, &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  // In milliseconds, at most INT_MAX (~24.8 days): `int` seconds × 1000 overflowed past that.
  const auto ms = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT_MAX));
  };
  if (config.max_connection_age_s > 0) {
    // GOAWAY after the age; clients reconnect (to another replica behind the balancer).
    const int grace_s = config.max_connection_age_grace_s >= 0 ? config.max_connection_age_grace_s
                                                               : config.max_connection_age_s;
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               ms(absl::Seconds(config.max_connection_age_s)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, ms(absl::Seconds(grace_s)));
  }
  if (config.keepalive_time > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(config.keepalive_time));
  }
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(config.keepalive_timeout));
  // Clients may ping too (every kMinClientPingS or more, with or without calls), as game
  // backends behind load balancers do to keep idle connections open; gRPC's default answers a
  // client pinging more often than every five minutes with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ms(absl::Seconds(kMinClientPingS)));
  shutdown_cq_ = builder.AddCompletionQueue(/*is_frequently_polled=*/false);
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("host/port: cannot listen on ", address,
                     " (the port taken, the host not an address of this machine, or a TLS key "
                     "that is not the certificate's: gRPC's log above says which)"));
  }
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);
    // Failing or stuck steps turn every status NOT_SERVING until the engine recovers (Shutdown
    // stops this before it sets NOT_SERVING for the drain).
    health_watch_ = std::thread([this, health, policy = config.engine_health,
                                 interval = config.health_watch_interval] {
      bool serving = true;
      while (!stop_health_watch_.WaitForNotificationWithTimeout(interval)) {
        const EngineHealth now = engine_->Health();
        if (EngineServing(now, policy) == serving) continue;
        serving = !serving;
        health->SetServingStatus(serving);  // every registered service, kServiceName too
        if (serving) {
          spdlog::info("engine recovered: health SERVING again");
        } else {
          spdlog::error("engine unhealthy ({} steps failed in a row, no progress for {:.1f} s): "
                        "health NOT_SERVING",
                        now.failed_steps_in_a_row, absl::ToDoubleSeconds(now.stalled));
        }
      }
    });
  }
  spdlog::info("serving {} on {}:{} (backend {}, {}{}), metrics {}", kServiceName,
               config.host, port_, backend_name_,
               config.tls.cert_path.empty() ? "plaintext"
               : config.tls.client_ca_path.empty() ? "TLS"
                                                   : "mutual TLS",
               auth_ != nullptr ? ", bearer auth" : "",
               config.metrics_port >= 0
                   ? absl::StrCat("on ", GrpcListenAddress(metrics_host, metrics_->exposer_port()))
                   : std::string("off"));
  return absl::OkStatus();
}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

void Server::Wait() {
  if (grpc_server_ != nullptr) grpc_server_->Wait();
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + grace;
  stop_health_watch_.Notify();
  if (health_watch_.joinable()) health_watch_.join();
  if (grpc_server_ != nullptr) {
    if (auto* health = grpc_server_->GetHealthCheckService(); health != nullptr) {
      health->SetServingStatus(false);  // every service, so probes and balancers stop sending
    }
    service_->StartDraining();  // a call that still gets through is refused with UNAVAILABLE
    spdlog::info("draining: {} streams in flight, up to {:.1f} s", service_->active_streams(),
                 absl::ToDoubleSeconds(grace));
    // gRPC's shutdown closes the listener and sends GOAWAY at once: clients open a new
    // connection for their next calls (another replica behind the balancer) while the calls in
    // flight run on. A call already on the wire as the GOAWAY goes out is refused (CANCELLED);
    // gRPC has no GOAWAY without this shutdown.
    grpc_server_shutdown_and_notify(grpc_server_->c_server(), shutdown_cq_->cq(), this);
    while (service_->active_streams() > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (const int left = service_->active_streams(); left > 0) {
      spdlog::warn("drain timeout: cancelling {} streams", left);
    }
    // The calls left get until then: none past the drain's deadline (streams cancelled, their
    // reactors tell the engine), else a moment for short calls still writing their reply; then
    // the rest, e.g. health Watch calls, which never end by themselves, are cancelled.
    grpc_server_->Shutdown(
        absl::ToChronoTime(std::min(deadline, absl::Now() + kOtherCallsAfterStreams)));
    // After the server's shutdown, as gRPC requires; drained with the C API, since the notice's
    // tag is not a C++ CompletionQueueTag.
    shutdown_cq_->Shutdown();
    while (grpc_completion_queue_next(shutdown_cq_->cq(), gpr_inf_future(GPR_CLOCK_REALTIME),
                                      nullptr)
               .type != GRPC_QUEUE_SHUTDOWN) {
    }
  }
  if (engine_ != nullptr) engine_->Shutdown();
  spdlog::info("stopped");
}

}  // namespace rtgen
