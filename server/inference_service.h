#pragma once
// rtgen.v1.Inference on the gRPC callback API: Generate (one GenerateReactor per call),
// Tokenize, GetModelInfo and GetLoad. Validation errors and engine refusals become gRPC statuses
// here, once. Every handler first checks the bearer token (when auth is on) and, while the
// server drains, refuses new Generate calls with UNAVAILABLE.
// Generate and Tokenize carry free text, so they are raw methods: the request arrives as bytes and
// is parsed by server/raw_message.h, which lets invalid UTF-8 through to validation (named field,
// INVALID_ARGUMENT) instead of gRPC's bare UNIMPLEMENTED.

#include <atomic>
#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "rtgen/v1/inference.grpc.pb.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/request_validation.h"

namespace rtgen {

// What the service knows about the served model. The pointers must outlive the service.
struct ServedModel {
  ModelConfig config;
  std::string backend_name;                     // "cpu", "cuda"
  const Tokenizer* tokenizer = nullptr;         // required
  const ChatTemplate* chat_template = nullptr;  // null: the model has none
};

// The callback service with Generate and Tokenize taking and returning serialized messages.
using InferenceServiceBase = v1::Inference::WithRawCallbackMethod_Generate<
    v1::Inference::WithRawCallbackMethod_Tokenize<v1::Inference::WithCallbackMethod_GetModelInfo<
        v1::Inference::WithCallbackMethod_GetLoad<v1::Inference::Service>>>>;

class InferenceService final : public InferenceServiceBase {
 public:
  // `engine` must outlive the service; `metrics` may be null.
  InferenceService(Engine* engine, ServedModel model, Metrics* metrics);

  // Requires a bearer token on every call from now on; `auth` must outlive the service.
  void set_authenticator(const TokenAuthenticator* auth) { auth_ = auth; }
  // What a request without stopping.max_tokens gets, within the room its prompt leaves (0: all
  // of that room). Before serving only.
  void set_default_max_tokens(int32_t n) { limits_.default_max_tokens = n; }
  // From now on Generate answers UNAVAILABLE; streams already open continue.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  // Generate streams whose reactor has not finished yet.
  int active_streams() const { return active_streams_.load(std::memory_order_acquire); }

  // `request` is a serialized v1::GenerateRequest; the stream writes v1::GenerateResponse.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  // `request` is a serialized v1::TokenizeRequest; `response` gets a v1::TokenizeResponse.
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::GetLoadRequest* request,
                                    v1::Load* response) override;

 private:
  // OK, or the status to end the call with (UNAUTHENTICATED) before doing anything.
  grpc::Status Authenticate(const grpc::CallbackServerContext& context) const;
  // Ends a unary call with `status` at once.
  static grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                             const grpc::Status& status);

  Engine* const engine_;
  const ServedModel model_;
  Metrics* const metrics_;
  ValidationLimits limits_;  // set before serving, read-only after
  const TokenAuthenticator* auth_ = nullptr;  // null: no authentication
  std::atomic<bool> draining_{false};
  std::atomic<int> active_streams_{0};
  std::atomic<uint64_t> next_request_number_{1};
};

}  // namespace rtgen
