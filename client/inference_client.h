#pragma once
// A small synchronous C++ client for rtgen.v1.Inference (and grpc.health.v1.Health).
// gRPC statuses become absl::Status with the same code and message.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rtgen/v1/inference.grpc.pb.h"

namespace rtgen {

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
const char* HealthStatusName(HealthStatus status);

// What a whole Generate stream amounted to.
struct GenerateResult {
  std::string text;                  // every text delta, concatenated
  std::vector<int32_t> token_ids;    // every token id
  int num_messages = 0;              // stream messages received
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;  // from the last message
  std::string stop_reason;
  v1::Usage usage;                   // from the last message
};

// How to reach a server that uses TLS and/or bearer-token auth.
struct ConnectOptions {
  bool tls = false;              // implied by any tls_* path
  std::string tls_ca_path;       // PEM roots to verify the server (empty: system roots)
  std::string tls_cert_path;     // PEM client certificate (mutual TLS), with tls_key_path
  std::string tls_key_path;
  std::string auth_token;        // non-empty: "authorization: Bearer <token>" on every call
};

class InferenceClient {
 public:
  explicit InferenceClient(std::shared_ptr<grpc::Channel> channel);
  // An insecure channel to "host:port".
  static std::unique_ptr<InferenceClient> Connect(const std::string& target);
  // A channel with `options`; NOT_FOUND / INVALID_ARGUMENT when a PEM file is unreadable or a
  // certificate comes without its key.
  static absl::StatusOr<std::unique_ptr<InferenceClient>> Connect(const std::string& target,
                                                                  const ConnectOptions& options);

  // Sends "authorization: Bearer <token>" on every later call (empty: none).
  void set_auth_token(std::string token) { auth_token_ = std::move(token); }

  using ResponseCallback = std::function<void(const v1::GenerateResponse&)>;
  // Streams one request, calling `on_response` (may be empty) for every message as it arrives.
  // `context` (optional) lets the caller set a deadline or TryCancel() from another thread; it
  // must be fresh. Returns the call's status when it is not OK, even after some messages.
  absl::StatusOr<GenerateResult> Generate(const v1::GenerateRequest& request,
                                          const ResponseCallback& on_response = {},
                                          grpc::ClientContext* context = nullptr);
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  absl::StatusOr<v1::ModelInfo> Info();
  absl::StatusOr<v1::Load> GetLoad();
  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  absl::StatusOr<HealthStatus> Health(const std::string& service = "",
                                      absl::Duration timeout = absl::Seconds(5));

  grpc::Channel* channel() const { return channel_.get(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  void AddAuth(grpc::ClientContext& context) const;

  absl::Duration unary_timeout_ = absl::Seconds(30);
  std::string auth_token_;
};

}  // namespace rtgen
