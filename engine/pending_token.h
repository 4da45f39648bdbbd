#pragma once
// The stand-in for a token that an earlier, still running step is sampling. Vocabulary ids are
// >= 0, so every negative id is a stand-in: PendingToken(j) = -1 - j means "what samples[j] of
// the step launched just before this one drew". The engine puts it in Sequence::tokens() when it
// launches a step (and into the next step's decode input), and replaces it with the real token
// when that step is collected.

#include <cstdint>

namespace rtgen {

constexpr int32_t PendingToken(int32_t sample_index) { return -1 - sample_index; }
constexpr bool IsPendingToken(int32_t token_id) { return token_id < 0; }
// The samples[] index a stand-in names (IsPendingToken(token_id) must hold).
constexpr int32_t PendingSampleIndex(int32_t token_id) { return -1 - token_id; }

}  // namespace rtgen
