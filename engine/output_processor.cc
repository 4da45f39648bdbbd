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

// Where a token's outcome goes: the stream text, the finish decision and its stop reason.
struct Out {
  std::string* text;
  FinishReason finish = FinishReason::kNone;
  std::string* stop_reason;
};

// Moves the decidable part of seq.held_text into the output; ends the request on a stop string.
void DrainHeld(Sequence& seq, bool release_all, Out* out) {
  const std::vector<std::string>& stops = seq.request().stopping.stop;
  if (stops.empty()) {  // the common case: nothing is ever held
    *out->text += seq.held_text;
    seq.held_text.clear();
    return;
  }
  std::string which;
  const size_t pos = FindStopString(seq.held_text, stops, &which);
  if (pos != std::string_view::npos) {
    out->text->append(seq.held_text, 0, pos);
    seq.held_text.clear();
    if (out->finish == FinishReason::kNone || out->finish == FinishReason::kLength) {
      out->finish = FinishReason::kStop;
      *out->stop_reason = which;
    }
    return;
  }
  const size_t hold = release_all ? 0 : StopStringHoldback(seq.held_text, stops);
  const size_t emit = seq.held_text.size() - hold;
  out->text->append(seq.held_text, 0, emit);
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

FinishReason AppendSampledToken(Sequence& seq, int32_t token, const Tokenizer& tokenizer,
                                int32_t max_model_len, std::string* text,
                                std::string* stop_reason) {
  seq.AppendToken(token);
  Out out{text, FinishReason::kNone, stop_reason};
  if (IsStopToken(seq, token, tokenizer)) {
    // The stop token's own text is not part of the output.
    *stop_reason = tokenizer.TokenBytes(token);
    *text += ReleaseHeldText(seq);
    return FinishReason::kStop;
  }
  if (seq.request().stopping.stop.empty()) {
    // Fast path: nothing is ever held back, so the new text goes straight out.
    *text += seq.detokenizer.Push(token);
  } else {
    seq.held_text += seq.detokenizer.Push(token);
    DrainHeld(seq, /*release_all=*/false, &out);
  }
  if (out.finish != FinishReason::kNone) return out.finish;
  if (seq.num_output_tokens() >= seq.request().stopping.max_tokens ||
      seq.num_tokens() >= max_model_len) {
    out.finish = FinishReason::kLength;
    seq.held_text += seq.detokenizer.Flush();
    DrainHeld(seq, /*release_all=*/true, &out);
  }
  return out.finish;
}

TokenResult AppendSampledToken(Sequence& seq, int32_t token, const Tokenizer& tokenizer,
                               int32_t max_model_len) {
  TokenResult result;
  result.finish = AppendSampledToken(seq, token, tokenizer, max_model_len, &result.text,
                                     &result.stop_reason);
  return result;
}

std::string ReleaseHeldText(Sequence& seq) {
  std::string text;
  std::string unused_reason;
  Out out{&text, FinishReason::kNone, &unused_reason};
  seq.held_text += seq.detokenizer.Flush();
  DrainHeld(seq, /*release_all=*/true, &out);
  return text;
}

}  // namespace rtgen
