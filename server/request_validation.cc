#include "server/request_validation.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "server/utf8.h"

namespace rtgen {
namespace {

constexpr int32_t kMaxLogprobs = 20;
constexpr size_t kMaxRequestIdBytes = 256;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Re-labels an error from a nested validator with the proto field path, e.g. "sampling.".
absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status CheckRole(const std::string& role, int index) {
  if (role == "system" || role == "user" || role == "assistant") return absl::OkStatus();
  // At most 32 bytes of it echoed: the message travels in a trailer, and a long one past the
  // peer's header limit turned the answer into RESOURCE_EXHAUSTED.
  constexpr size_t kEchoed = 32;
  size_t cut = std::min(role.size(), kEchoed);
  while (cut < role.size() && cut > 0 && (static_cast<unsigned char>(role[cut]) & 0xC0) == 0x80) {
    --cut;  // not inside a UTF-8 sequence
  }
  // Sanitized: a status message travels as UTF-8, and the role's bytes may be anything.
  const std::string shown =
      cut == role.size()
          ? SanitizeUtf8(role)
          : absl::StrCat(SanitizeUtf8(role.substr(0, cut)), "... (", role.size(), " bytes)");
  return Invalid(absl::StrFormat("messages[%d].role", index),
                 absl::StrFormat("unknown role '%s' (expected system, user or assistant)", shown));
}

SamplingParams SamplingFromProto(const v1::GenerateRequest& request) {
  const v1::SamplingParams& p = request.sampling();
  SamplingParams out;
  if (p.has_temperature()) out.temperature = p.temperature();
  // -1 is vLLM's and the OpenAI-compatible servers' "off", as 0 is here; other negatives are
  // refused by SamplingParams::Validate, naming the field.
  if (p.has_top_k()) out.top_k = p.top_k() == -1 ? 0 : p.top_k();
  if (p.has_top_p()) out.top_p = p.top_p();
  if (p.has_min_p()) out.min_p = p.min_p();
  if (p.has_repetition_penalty()) out.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) out.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) out.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) out.seed = p.seed();
  out.logprobs = request.logprobs();
  return out;
}

absl::StatusOr<TokenizedPrompt> TokenizeGenerateInput(const v1::GenerateRequest& request,
                                                      const ValidationLimits& limits) {
  const std::optional<bool> add_special =
      request.has_add_special_tokens() ? std::optional<bool>(request.add_special_tokens())
                                       : std::nullopt;
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      return TokenizePrompt(request.prompt(), add_special, limits,
                            static_cast<size_t>(MaxPromptTokensEncoded(limits)));
    case v1::GenerateRequest::kMessages:
      return TokenizeMessages(request.messages(), limits,
                              static_cast<size_t>(MaxPromptTokensEncoded(limits)));
    case v1::GenerateRequest::kPromptTokenIds: {
      const auto& ids = request.prompt_token_ids().ids();
      if (ids.empty()) return Invalid("prompt_token_ids", "must not be empty");
      const int32_t vocab = limits.tokenizer->vocab_size();
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= vocab) {
          return Invalid(absl::StrFormat("prompt_token_ids.ids[%d]", i),
                         absl::StrFormat("%d is out of range [0, %d)", ids[i], vocab));
        }
      }
      return TokenizedPrompt{{ids.begin(), ids.end()}, ""};
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return Invalid("input", "one of prompt, prompt_token_ids or messages is required");
}

absl::string_view InputFieldName(const v1::GenerateRequest& request) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kPromptTokenIds:
      return "prompt_token_ids";
    case v1::GenerateRequest::kMessages:
      return "messages";
    default:
      return "prompt";
  }
}

}  // namespace

int64_t MaxPromptTokensEncoded(const ValidationLimits& limits) {
  return 4 * int64_t{std::max(limits.max_model_len, 1)};
}

absl::StatusOr<TokenizedPrompt> TokenizePrompt(const std::string& prompt,
                                               std::optional<bool> add_special_tokens,
                                               const ValidationLimits& limits,
                                               size_t max_prompt_tokens) {
  if (prompt.empty()) return Invalid("prompt", "must not be empty");
  if (!IsValidUtf8(prompt)) return Invalid("prompt", "is not valid UTF-8");
  const Tokenizer& tokenizer = *limits.tokenizer;
  TokenizedPrompt out;
  absl::StatusOr<std::vector<int32_t>> ids =
      tokenizer.EncodeAtMost(prompt, /*parse_special=*/true, max_prompt_tokens);
  if (!ids.ok()) return WithPrefix(ids.status(), "prompt: ");
  out.stopped_early = ids->size() > max_prompt_tokens;
  const bool add_bos = add_special_tokens.value_or(tokenizer.add_bos());
  const std::optional<int32_t> bos = tokenizer.bos_id();
  if (add_bos && bos.has_value() && (ids->empty() || ids->front() != *bos)) {
    out.token_ids.push_back(*bos);
  }
  out.token_ids.insert(out.token_ids.end(), ids->begin(), ids->end());
  if (out.token_ids.empty()) return Invalid("prompt", "produced no tokens");
  return out;
}

absl::StatusOr<TokenizedPrompt> TokenizeMessages(const v1::ChatMessages& messages,
                                                 const ValidationLimits& limits,
                                                 size_t max_prompt_tokens) {
  if (messages.messages().empty()) return Invalid("messages", "must not be empty");
  if (limits.chat_template == nullptr) {
    return Invalid("messages", "the model has no chat template; send a prompt instead");
  }
  std::vector<ChatMessage> chat;
  chat.reserve(messages.messages_size());
  for (int i = 0; i < messages.messages_size(); ++i) {
    const v1::ChatMessage& m = messages.messages(i);
    RETURN_IF_ERROR(CheckRole(m.role(), i));
    if (!IsValidUtf8(m.content())) {
      return Invalid(absl::StrFormat("messages[%d].content", i), "is not valid UTF-8");
    }
    chat.push_back(ChatMessage{m.role(), m.content()});
  }
  TokenizedPrompt out;
  ASSIGN_OR_RETURN(out.rendered_prompt,
                   limits.chat_template->Render(chat, /*add_generation_prompt=*/true));
  absl::StatusOr<std::vector<int32_t>> ids =
      limits.tokenizer->EncodeAtMost(out.rendered_prompt, /*parse_special=*/true,
                                     max_prompt_tokens);
  if (!ids.ok()) return WithPrefix(ids.status(), "messages: ");
  out.stopped_early = ids->size() > max_prompt_tokens;
  out.token_ids = *std::move(ids);
  // The Llama 2 format renders a lone system message as nothing (it has no user turn).
  if (out.token_ids.empty()) {
    return Invalid("messages", "the chat template rendered no tokens (it needs a user message)");
  }
  return out;
}

absl::StatusOr<TokenizedPrompt> TokenizeRequestInput(const v1::TokenizeRequest& request,
                                                     const ValidationLimits& limits) {
  switch (request.input_case()) {
    case v1::TokenizeRequest::kPrompt:
      return TokenizePrompt(request.prompt(),
                            request.has_add_special_tokens()
                                ? std::optional<bool>(request.add_special_tokens())
                                : std::nullopt,
                            limits);
    case v1::TokenizeRequest::kMessages:
      return TokenizeMessages(request.messages(), limits);
    case v1::TokenizeRequest::INPUT_NOT_SET:
      break;
  }
  return Invalid("input", "one of prompt or messages is required");
}

absl::StatusOr<Request> ToEngineRequest(const v1::GenerateRequest& request,
                                        const ValidationLimits& limits) {
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return Invalid("request_id", absl::StrFormat("longer than %d bytes", kMaxRequestIdBytes));
  }
  if (!IsValidUtf8(request.request_id())) return Invalid("request_id", "is not valid UTF-8");
  if (request.logprobs() < 0 || request.logprobs() > kMaxLogprobs) {
    return Invalid("logprobs", absl::StrFormat("%d is out of range [0, %d]", request.logprobs(),
                                               kMaxLogprobs));
  }
  if (request.has_latency_budget_ms() && request.latency_budget_ms() == 0) {
    return Invalid("latency_budget_ms", "must be positive when set");
  }
  const int32_t vocab = limits.tokenizer->vocab_size();
  Request out;
  out.sampling = SamplingFromProto(request);
  out.return_logprobs = request.has_logprobs();
  out.skip_special_tokens = !request.has_skip_special_tokens() || request.skip_special_tokens();
  // SamplingParams/StoppingParams name their fields with the proto path ("sampling.top_p").
  RETURN_IF_ERROR(out.sampling.Validate(vocab));

  ASSIGN_OR_RETURN(TokenizedPrompt prompt, TokenizeGenerateInput(request, limits));
  if (prompt.stopped_early) {
    return Invalid(InputFieldName(request),
                   absl::StrFormat("more than %d prompt tokens (encoding stopped there) leave no "
                                   "room to generate within the context length of %d tokens",
                                   MaxPromptTokensEncoded(limits), limits.max_model_len));
  }
  const int32_t prompt_len = static_cast<int32_t>(prompt.token_ids.size());
  if (prompt_len >= limits.max_model_len) {
    return Invalid(InputFieldName(request),
                   absl::StrFormat("%d prompt tokens leave no room to generate within the "
                                   "context length of %d tokens",
                                   prompt_len, limits.max_model_len));
  }
  // A prompt that alone outgrows the KV pool (a pool smaller than the context) is refused naming
  // the input, not left to the engine's refusal of "prompt + max_tokens" (a max_tokens the
  // client may not have sent, and lowering it would not help).
  if (limits.kv_pool_tokens > 0 && prompt_len > limits.kv_pool_tokens) {
    return Invalid(InputFieldName(request),
                   absl::StrFormat("%d prompt tokens do not fit in the KV pool of %d tokens "
                                   "(--num-kv-blocks x the block size); shorten the prompt",
                                   prompt_len, limits.kv_pool_tokens));
  }
  out.prompt_tokens = std::move(prompt.token_ids);

  const v1::StoppingParams& stopping = request.stopping();
  const int32_t room = limits.max_model_len - prompt_len;
  if (stopping.has_max_tokens()) {
    if (stopping.max_tokens() > room) {
      return Invalid("stopping.max_tokens",
                     absl::StrFormat("%d prompt tokens + max_tokens %d exceed the context length "
                                     "of %d tokens",
                                     prompt_len, stopping.max_tokens(), limits.max_model_len));
    }
    // Within the KV pool too (a pool smaller than the context), as the engine checks it, but
    // naming the field. The last token's KV is never written: one token more.
    if (limits.kv_pool_tokens > 0 &&
        prompt_len + int64_t{stopping.max_tokens()} - 1 > limits.kv_pool_tokens) {
      return Invalid("stopping.max_tokens",
                     absl::StrFormat("%d prompt tokens + max_tokens %d need %d KV slots but the "
                                     "KV pool holds %d tokens (--num-kv-blocks x the block "
                                     "size); at most %d here",
                                     prompt_len, stopping.max_tokens(),
                                     prompt_len + int64_t{stopping.max_tokens()} - 1,
                                     limits.kv_pool_tokens,
                                     limits.kv_pool_tokens - prompt_len + 1));
    }
    out.stopping.max_tokens = stopping.max_tokens();
  } else {
    int64_t most = limits.default_max_tokens > 0 ? std::min(limits.default_max_tokens, room) : room;
    // Within the KV pool as well, when the prompt fits in it (one that does not is refused by
    // the engine, naming the pool). The last token's KV is never written: one token more.
    if (limits.kv_pool_tokens >= prompt_len) {
      most = std::min(most, limits.kv_pool_tokens - prompt_len + 1);
    }
    out.stopping.max_tokens = static_cast<int32_t>(most);
  }
  if (stopping.stop_token_ids_size() > limits.max_stop_token_ids) {  // before copying them
    return Invalid("stopping.stop_token_ids",
                   absl::StrFormat("has %d ids, at most %d allowed",
                                   stopping.stop_token_ids_size(), limits.max_stop_token_ids));
  }
  out.stopping.stop.assign(stopping.stop().begin(), stopping.stop().end());
  out.stopping.stop_token_ids.assign(stopping.stop_token_ids().begin(),
                                     stopping.stop_token_ids().end());
  out.stopping.ignore_eos = stopping.ignore_eos();
  RETURN_IF_ERROR(out.stopping.Validate(vocab, limits.max_stop_strings,
                                        limits.max_stop_string_bytes, limits.max_stop_token_ids));

  out.priority = request.priority();
  if (request.has_latency_budget_ms()) {
    out.latency_budget = absl::Milliseconds(request.latency_budget_ms());
  }
  return out;
}

}  // namespace rtgen
