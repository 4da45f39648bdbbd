#pragma once
// Turns the public GenerateRequest / TokenizeRequest into engine input: tokenization, chat
// template, BOS, and every field check. Errors are INVALID_ARGUMENT naming the field, e.g.
// "messages[1].role: unknown role 'wizard'".

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "rtgen/v1/inference.pb.h"

namespace rtgen {

// What validation needs to know about the served model and engine limits.
struct ValidationLimits {
  const Tokenizer* tokenizer = nullptr;          // required
  const ChatTemplate* chat_template = nullptr;   // null: the model has no chat template
  int32_t max_model_len = 2048;                  // context, tokens
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_stop_token_ids = 256;
  int32_t default_max_tokens = 256;  // when stopping.max_tokens is unset; 0: the room left
  // Tokens one sequence's KV can hold in the whole pool (num_kv_blocks × block_size); 0: no
  // smaller than the context. An unset max_tokens is clipped to it too, so that a request that
  // set none is not refused for a pool smaller than the context.
  int64_t kv_pool_tokens = 0;
};

// Prompt tokens and (for chat messages) the rendered template text.
struct TokenizedPrompt {
  std::vector<int32_t> token_ids;
  std::string rendered_prompt;  // chat messages only
  // The text holds more tokens than token_ids: encoding stopped past the caller's
  // `max_prompt_tokens`.
  bool stopped_early = false;
};

// Tokens a Generate prompt is encoded to at most before it is refused as too long: four
// contexts, so that a prompt somewhat too long gets its exact count in the refusal, and one of
// megabytes is not merged whole (Tokenizer::EncodeAtMost). Tokenize answers every id.
int64_t MaxPromptTokensEncoded(const ValidationLimits& limits);

// A raw prompt: special-token text is parsed as special tokens (as Hugging Face does);
// BOS is added when `add_special_tokens` says so (unset: the model's add_bos), never twice.
// Text of more than `max_prompt_tokens` tokens gives the first max_prompt_tokens + 1 (BOS
// aside) and stopped_early, which a caller that passes a limit must refuse.
absl::StatusOr<TokenizedPrompt> TokenizePrompt(
    const std::string& prompt, std::optional<bool> add_special_tokens,
    const ValidationLimits& limits,
    size_t max_prompt_tokens = std::numeric_limits<size_t>::max() - 1);
// Chat messages through the model's chat template (which supplies BOS itself);
// `max_prompt_tokens` as for TokenizePrompt.
absl::StatusOr<TokenizedPrompt> TokenizeMessages(
    const v1::ChatMessages& messages, const ValidationLimits& limits,
    size_t max_prompt_tokens = std::numeric_limits<size_t>::max() - 1);
absl::StatusOr<TokenizedPrompt> TokenizeRequestInput(const v1::TokenizeRequest& request,
                                                     const ValidationLimits& limits);

// Everything but id, deadline and arrival, which the service fills from the call.
absl::StatusOr<Request> ToEngineRequest(const v1::GenerateRequest& request,
                                        const ValidationLimits& limits);

}  // namespace rtgen
