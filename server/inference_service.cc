#include "server/inference_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/generate_reactor.h"
#include "server/raw_message.h"
#include "server/status_conversion.h"
#include "server/utf8.h"

namespace rtgen {
namespace {

ValidationLimits MakeLimits(const EngineConfig& config, const ServedModel& model) {
  ValidationLimits limits;
  limits.tokenizer = model.tokenizer;
  limits.chat_template = model.chat_template;
  limits.max_model_len = config.max_model_len;
  limits.max_stop_strings = config.max_stop_strings;
  limits.max_stop_string_bytes = config.max_stop_string_bytes;
  limits.max_stop_token_ids = config.max_stop_token_ids;
  if (config.num_kv_blocks > 0) {
    limits.kv_pool_tokens = int64_t{config.num_kv_blocks} * config.block_size;
  }
  return limits;
}

// The call's deadline as an absl::Time (infinite when the client set none).
absl::Time CallDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

}  // namespace

grpc::Status InferenceService::Authenticate(const grpc::CallbackServerContext& context) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return auth_->Check(context.client_metadata());
}

grpc::ServerUnaryReactor* InferenceService::FinishNow(grpc::CallbackServerContext* context,
                                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

InferenceService::InferenceService(Engine* engine, ServedModel model, Metrics* metrics)
    : engine_(engine),
      model_(std::move(model)),
      metrics_(metrics),
      limits_(MakeLimits(engine->config(), model_)) {}

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire) {
  const absl::Time arrival = absl::Now();
  const uint64_t number = next_request_number_.fetch_add(1, std::memory_order_relaxed);
  // Only an authenticated caller's message is parsed (up to --max-message-bytes of work).
  const grpc::Status auth = Authenticate(*context);
  v1::GenerateRequest request;
  const absl::Status parsed =
      auth.ok() ? ParseAllowingInvalidUtf8(*wire, request) : absl::OkStatus();
  std::string client_id =
      request.request_id().empty() ? absl::StrCat("req-", number) : request.request_id();
  // Client ids need not be unique; the engine's id must be among live requests.
  std::string engine_id = absl::StrCat(client_id, "#", number);
  auto* reactor = new GenerateReactor(engine_, metrics_, std::move(engine_id),
                                      SanitizeUtf8(client_id));
  active_streams_.fetch_add(1, std::memory_order_acq_rel);
  reactor->set_on_done([this] { active_streams_.fetch_sub(1, std::memory_order_acq_rel); });
  if (!auth.ok()) {
    reactor->Reject(absl::Status(static_cast<absl::StatusCode>(auth.error_code()),
                                 auth.error_message()));
    return reactor;
  }
  if (draining_.load(std::memory_order_acquire)) {
    reactor->Reject(absl::UnavailableError("server is draining; retry on another replica"));
    return reactor;
  }
  if (!parsed.ok()) {
    reactor->Reject(parsed);
    return reactor;
  }
  absl::StatusOr<Request> converted = ToEngineRequest(request, limits_);
  if (!converted.ok()) {
    reactor->Reject(converted.status());
    return reactor;
  }
  converted->arrival = arrival;
  converted->deadline = CallDeadline(*context);
  reactor->Start(*std::move(converted));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* wire,
                                                     grpc::ByteBuffer* wire_response) {
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) return FinishNow(context, auth);
  v1::TokenizeRequest request;
  if (absl::Status parsed = ParseAllowingInvalidUtf8(*wire, request); !parsed.ok()) {
    return FinishNow(context, ToGrpcStatus(parsed));
  }
  absl::StatusOr<TokenizedPrompt> tokenized = TokenizeRequestInput(request, limits_);
  if (!tokenized.ok()) return FinishNow(context, ToGrpcStatus(tokenized.status()));
  v1::TokenizeResponse response;
  for (int32_t id : tokenized->token_ids) {
    response.add_token_ids(id);
    response.add_pieces(SanitizeUtf8(model_.tokenizer->TokenBytes(id)));
  }
  response.set_rendered_prompt(std::move(tokenized->rendered_prompt));
  *wire_response = SerializeToByteBuffer(response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest*,
                                                         v1::ModelInfo* response) {
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) return FinishNow(context, auth);
  const ModelConfig& config = model_.config;
  const EngineConfig& engine_config = engine_->config();
  response->set_name(SanitizeUtf8(config.name));
  response->set_architecture(SanitizeUtf8(config.architecture));
  response->set_vocab_size(model_.tokenizer->vocab_size());
  response->set_context_length(engine_config.max_model_len);
  response->set_trained_context_length(config.max_position_embeddings);
  response->set_num_layers(config.num_layers);
  response->set_hidden_size(config.hidden_size);
  response->set_num_heads(config.num_heads);
  response->set_num_kv_heads(config.num_kv_heads);
  response->set_backend(model_.backend_name);
  response->set_has_chat_template(model_.chat_template != nullptr);
  if (auto bos = model_.tokenizer->bos_id()) response->set_bos_token_id(*bos);
  if (auto eos = model_.tokenizer->eos_id()) response->set_eos_token_id(*eos);
  response->set_kv_block_size(engine_config.block_size);
  response->set_max_num_seqs(engine_config.max_num_seqs);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetLoad(grpc::CallbackServerContext* context,
                                                    const v1::GetLoadRequest*,
                                                    v1::Load* response) {
  if (grpc::Status auth = Authenticate(*context); !auth.ok()) return FinishNow(context, auth);
  const LoadSnapshot load = engine_->GetLoad();
  response->set_waiting(load.waiting);
  response->set_running(load.running);
  response->set_kv_blocks_free(load.kv_blocks_free);
  response->set_kv_blocks_total(load.kv_blocks_total);
  response->set_kv_cache_usage_ratio(
      load.kv_blocks_total > 0
          ? static_cast<double>(load.kv_blocks_total - load.kv_blocks_free) / load.kv_blocks_total
          : 0.0);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace rtgen
