#pragma once
// UTF-8 helpers (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rtgen {

// Length of the well-formed sequence starting at s[pos]: > 0 when complete and valid, 0 when
// the bytes up to the end of `s` are a valid but incomplete prefix, -1 when invalid.
int Utf8SequenceAt(std::string_view s, size_t pos);

// Byte offset of the first ill-formed (or truncated) sequence; nullopt when `s` is valid.
std::optional<size_t> FindInvalidUtf8(std::string_view s);

// Decodes the code point at s[*pos] and advances *pos. `s` must be valid UTF-8 there.
char32_t NextCodepoint(std::string_view s, size_t* pos);

void AppendUtf8(char32_t cp, std::string* out);

// Moves the longest prefix of *pending that can be emitted into the result: complete
// characters as they are, invalid bytes as U+FFFD (one per maximal invalid subpart). A valid
// but incomplete tail stays in *pending unless `flush`, when it too becomes U+FFFD.
std::string TakeValidUtf8(std::string* pending, bool flush);

}  // namespace rtgen
