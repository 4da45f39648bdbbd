#pragma once
// rtgen.v1.Inference on the gRPC callback API: Generate (one GenerateReactor per call),
// Tokenize, GetModelInfo and GetLoad. Validation errors and engine refusals become gRPC statuses
// here, once.

#include <atomic>
#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "rtgen/v1/inference.grpc.pb.h"
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

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // `engine` must outlive the service; `metrics` may be null.
  InferenceService(Engine* engine, ServedModel model, Metrics* metrics);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::GetLoadRequest* request,
                                    v1::Load* response) override;

 private:
  Engine* const engine_;
  const ServedModel model_;
  Metrics* const metrics_;
  const ValidationLimits limits_;
  std::atomic<uint64_t> next_request_number_{1};
};

}  // namespace rtgen
