#pragma once
// UTF-8 checks for text that crosses the API (proto3 strings must be valid UTF-8).

#include <string>
#include "absl/strings/string_view.h"

namespace rtgen {

// Well-formed UTF-8: no overlong forms, surrogates or code points above U+10FFFF.
bool IsValidUtf8(absl::string_view text);
// `text` with every invalid byte sequence replaced by U+FFFD.
std::string SanitizeUtf8(absl::string_view text);

}  // namespace rtgen
