#pragma once
// Pre-tokenizer split rules of byte-level BPE tokenizers, written by hand (no regex engine).
// Each rule set cuts valid UTF-8 text into pieces that BPE then encodes independently.

#include <string_view>
#include <vector>

namespace rtgen {

enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Every \p{N} character is its own piece, then GPT-2 within the rest (SmolLM2, StarCoder;
  // HF: Digits(individual_digits) + ByteLevel).
  kGpt2IndividualDigits,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
};

// `text` must be valid UTF-8. The pieces cover `text` in order, without gaps.
std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace rtgen
