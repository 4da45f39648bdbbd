#include "engine/output_processor.h"

#include <algorithm>

namespace rtgen {

size_t StopStringHoldback(std::string_view text, std::span<const std::string> stops) {
  size_t hold = 0;
  for (const std::string& stop : stops) {
    const size_t max_len = std::min(text.size(), stop.size() - (stop.empty() ? 0 : 1));
    for (size_t len = max_len; len > hold; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

size_t FindStopString(std::string_view text, std::span<const std::string> stops,
                      std::string* which) {
  size_t best = std::string_view::npos;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t pos = text.find(stop);
    if (pos < best) {
      best = pos;
      *which = stop;
    }
  }
  return best;
}

namespace {

// Moves the decidable part of seq.held_text into the result; ends the request on a stop string.
void DrainHeld(Sequence& seq, bool release_all, TokenResult* result) {
  const std::vector<std::string>& stops = seq.request().stopping.stop;
  if (stops.empty()) {  // the common case: nothing is ever held
    result->text += seq.held_text;
    seq.held_text.clear();
    return;
  }
  std::string which;
  const size_t pos = FindStopString(seq.held_text, stops, &which);
  if (pos != std::string_view::npos) {
    result->text += seq.held_text.substr(0, pos);
    seq.held_text.clear();
    if (result->finish == FinishReason::kNone || result->finish == FinishReason::kLength) {
      result->finish = FinishReason::kStop;
      result->stop_reason = which;
    }
    return;
  }
  const size_t hold = release_all ? 0 : StopStringHoldback(seq.held_text, stops);
  const size_t emit = seq.held_text.size() - hold;
  result->text += seq.held_text.substr(0, emit);
  seq.held_text.erase(0, emit);
}

bool IsStopToken(const Sequence& seq, int32_t token, const Tokenizer& tokenizer) {
  const StoppingParams& stopping = seq.request().stopping;
  if (std::find(stopping.stop_token_ids.begin(), stopping.stop_token_ids.end(), token) !=
      stopping.stop_token_ids.end()) {
    return true;
  }
  if (stopping.ignore_eos) return false;
  const std::vector<int32_t>& ids = tokenizer.stop_ids();
  if (std::find(ids.begin(), ids.end(), token) != ids.end()) return true;
  return tokenizer.eos_id().has_value() && *tokenizer.eos_id() == token;
}

}  // namespace

TokenResult AppendSampledToken(Sequence& seq, int32_t token, const Tokenizer& tokenizer,
                               int32_t max_model_len) {
  TokenResult result;
  seq.AppendToken(token);
  if (IsStopToken(seq, token, tokenizer)) {
    // The stop token's own text is not part of the output.
    result.finish = FinishReason::kStop;
    result.stop_reason = tokenizer.TokenBytes(token);
    result.text = ReleaseHeldText(seq);
    return result;
  }
  seq.held_text += seq.detokenizer.Push(token);
  DrainHeld(seq, /*release_all=*/false, &result);
  if (result.finish != FinishReason::kNone) return result;
  if (seq.num_output_tokens() >= seq.request().stopping.max_tokens ||
      seq.num_tokens() >= max_model_len) {
    result.finish = FinishReason::kLength;
    seq.held_text += seq.detokenizer.Flush();
    DrainHeld(seq, /*release_all=*/true, &result);
  }
  return result;
}

std::string ReleaseHeldText(Sequence& seq) {
  TokenResult result;
  seq.held_text += seq.detokenizer.Flush();
  DrainHeld(seq, /*release_all=*/true, &result);
  return result.text;
}

}  // namespace rtgen
