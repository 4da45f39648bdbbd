#pragma once
// Unicode character classes used by the BPE pre-tokenizer split rules.

namespace rtgen {

bool IsLetter(char32_t cp);      // \p{L}
bool IsNumber(char32_t cp);      // \p{N}
bool IsWhitespace(char32_t cp);  // \s: the Unicode White_Space property

}  // namespace rtgen
