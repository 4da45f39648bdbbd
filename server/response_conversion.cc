#include "server/response_conversion.h"

#include <string>

#include "absl/time/time.h"
#include "server/utf8.h"

namespace rtgen {

v1::FinishReason FinishReasonToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kDeadline:
      return v1::FINISH_REASON_DEADLINE;
    case FinishReason::kError:
      return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_ERROR;
}

v1::GenerateResponse ChunkToResponse(const StreamChunk& chunk, const std::string& request_id) {
  v1::GenerateResponse out;
  out.set_request_id(request_id);
  out.mutable_token_ids()->Add(chunk.token_ids.begin(), chunk.token_ids.end());
  out.set_text(chunk.text);
  for (const SampledToken& sampled : chunk.logprobs) {
    v1::TokenLogprobs* lp = out.add_logprobs();
    lp->set_token_id(sampled.token_id);
    lp->set_logprob(sampled.logprob);
    for (const TokenLogprob& alt : sampled.top) {
      v1::TokenLogprob* top = lp->add_top();
      top->set_token_id(alt.token_id);
      top->set_logprob(alt.logprob);
    }
  }
  if (chunk.finish == FinishReason::kNone) return out;

  out.set_finish_reason(FinishReasonToProto(chunk.finish));
  out.set_stop_reason(SanitizeUtf8(chunk.stop_reason));
  if (!chunk.error.ok()) out.set_error_message(SanitizeUtf8(chunk.error.message()));
  v1::Usage* usage = out.mutable_usage();
  usage->set_prompt_tokens(chunk.usage.prompt_tokens);
  usage->set_cached_tokens(chunk.usage.cached_tokens);
  usage->set_generated_tokens(chunk.usage.generated_tokens);
  usage->set_queue_time_seconds(absl::ToDoubleSeconds(chunk.usage.queue_time));
  usage->set_time_to_first_token_seconds(absl::ToDoubleSeconds(chunk.usage.time_to_first_token));
  usage->set_total_time_seconds(absl::ToDoubleSeconds(chunk.usage.total_time));
  return out;
}

}  // namespace rtgen
