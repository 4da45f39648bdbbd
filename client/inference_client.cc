#include "client/inference_client.h"

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include <grpcpp/generic/generic_stub.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rtgen {
namespace {

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share the google.rpc.Code values.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

void SetTimeout(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// HealthCheckRequest{service = 1: string}, written by hand (no generated health stubs).
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0A);  // field 1, length-delimited
  for (uint64_t n = service.size();; n >>= 7) {  // varint length
    if (n < 0x80) {
      out.push_back(static_cast<char>(n));
      break;
    }
    out.push_back(static_cast<char>((n & 0x7F) | 0x80));
  }
  return out + service;
}

// HealthCheckResponse{status = 1: enum}; an absent field is UNKNOWN (0).
absl::StatusOr<HealthStatus> DecodeHealthResponse(const std::string& bytes) {
  if (bytes.empty()) return HealthStatus::kUnknown;
  if (bytes.size() < 2 || bytes[0] != 0x08) {
    return absl::DataLossError("health: unexpected HealthCheckResponse encoding");
  }
  const int value = static_cast<unsigned char>(bytes[1]);
  if (value > 3) return absl::DataLossError(absl::StrCat("health: unknown status ", value));
  return static_cast<HealthStatus>(value);
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kUnknown:
      return "UNKNOWN";
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

InferenceClient::InferenceClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(v1::Inference::NewStub(channel_)) {}

std::unique_ptr<InferenceClient> InferenceClient::Connect(const std::string& target) {
  return std::make_unique<InferenceClient>(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

absl::StatusOr<std::unique_ptr<InferenceClient>> InferenceClient::Connect(
    const std::string& target, const ConnectOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  const bool tls = options.tls || !options.tls_ca_path.empty() ||
                   !options.tls_cert_path.empty() || !options.tls_key_path.empty();
  if (!tls) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
      return absl::InvalidArgumentError("tls-cert and tls-key must be given together");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_path.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(options.tls_ca_path, "tls-ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!options.tls_cert_path.empty()) {
      absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_path, "tls-cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(options.tls_key_path, "tls-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  auto client = std::make_unique<InferenceClient>(grpc::CreateChannel(target, credentials));
  client->set_auth_token(options.auth_token);
  return client;
}

void InferenceClient::AddAuth(grpc::ClientContext& context) const {
  if (!auth_token_.empty()) context.AddMetadata("authorization", "Bearer " + auth_token_);
}

absl::StatusOr<GenerateResult> InferenceClient::Generate(const v1::GenerateRequest& request,
                                                         const ResponseCallback& on_response,
                                                         grpc::ClientContext* context) {
  grpc::ClientContext own_context;
  if (context == nullptr) context = &own_context;
  AddAuth(*context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(context, request);
  GenerateResult result;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    ++result.num_messages;
    result.text += response.text();
    result.token_ids.insert(result.token_ids.end(), response.token_ids().begin(),
                            response.token_ids().end());
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = response.finish_reason();
      result.stop_reason = response.stop_reason();
      result.usage = response.usage();
    }
    if (on_response) on_response(response);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return ToAbslStatus(status);
  // The protocol's last message carries the finish reason; a stream that ends OK without one
  // (a proxy, another server) lost it, and its usage with it.
  if (result.finish_reason == v1::FINISH_REASON_UNSPECIFIED) {
    return absl::DataLossError(absl::StrCat("Generate: the stream ended after ",
                                            result.num_messages,
                                            " message(s) without a finish_reason"));
  }
  return result;
}

absl::StatusOr<v1::TokenizeResponse> InferenceClient::Tokenize(
    const v1::TokenizeRequest& request) {
  grpc::ClientContext context;
  AddAuth(context);
  SetTimeout(context, unary_timeout_);
  v1::TokenizeResponse response;
  const grpc::Status status = stub_->Tokenize(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status);
  return response;
}

absl::StatusOr<v1::ModelInfo> InferenceClient::Info() {
  grpc::ClientContext context;
  AddAuth(context);
  SetTimeout(context, unary_timeout_);
  v1::ModelInfo response;
  const grpc::Status status = stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &response);
  if (!status.ok()) return ToAbslStatus(status);
  return response;
}

absl::StatusOr<v1::Load> InferenceClient::GetLoad() {
  grpc::ClientContext context;
  AddAuth(context);
  SetTimeout(context, unary_timeout_);
  v1::Load response;
  const grpc::Status status = stub_->GetLoad(&context, v1::GetLoadRequest(), &response);
  if (!status.ok()) return ToAbslStatus(status);
  return response;
}

absl::StatusOr<HealthStatus> InferenceClient::Health(const std::string& service,
                                                     absl::Duration timeout) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  AddAuth(context);
  SetTimeout(context, timeout);
  const std::string request_bytes = EncodeHealthRequest(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;

  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   done_cv.notify_one();
                 });
  {
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) return ToAbslStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::DataLossError("health: unreadable response");
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return DecodeHealthResponse(bytes);
}

}  // namespace rtgen
