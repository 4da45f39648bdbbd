#pragma once
// Turns one sampled token into stream text and a stop decision: EOS / stop ids, max_tokens, the
// context limit, and stop strings even when a stop string is split across tokens (text that
// could be the start of a stop string is held back in Sequence::held_text until it is decided).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine/request.h"
#include "engine/sequence.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {

struct TokenResult {
  std::string text;                          // new complete UTF-8 text, stop strings removed
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;                   // the stop string or stop token's text
};

// Appends `token` to `seq` and decides whether it ends the request. On any finish, all text still
// held back is released (cut at a stop string when one matched).
TokenResult AppendSampledToken(Sequence& seq, int32_t token, const Tokenizer& tokenizer,
                               int32_t max_model_len);

// The same, writing into a stream chunk's fields (appends to `text`, sets `stop_reason` on a stop)
// and returning the finish decision: the engine's per-token path, free of temporaries.
FinishReason AppendSampledToken(Sequence& seq, int32_t token, const Tokenizer& tokenizer,
                                int32_t max_model_len, std::string* text,
                                std::string* stop_reason);

// Releases the detokenizer's pending bytes and the held-back text (for a finish that did not
// come from a stop string: length, cancel, deadline, error). Still cuts at a stop string.
std::string ReleaseHeldText(Sequence& seq);

// Bytes at the end of `text` that are a proper prefix of some stop string (held back).
size_t StopStringHoldback(std::string_view text, std::span<const std::string> stops);

// Earliest position of any stop string in `text`, or npos; `which` gets the stop string.
size_t FindStopString(std::string_view text, std::span<const std::string> stops,
                      std::string* which);

}  // namespace rtgen
