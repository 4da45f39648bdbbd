#include "server/utf8.h"

#include <string_view>

#include "engine/common/utf8.h"

namespace rtgen {

// Both delegate to the tokenizer's RFC 3629 helpers: one definition of well-formed UTF-8.
bool IsValidUtf8(absl::string_view text) {
  return !FindInvalidUtf8(std::string_view(text.data(), text.size())).has_value();
}

std::string SanitizeUtf8(absl::string_view text) {
  std::string pending(text);
  return TakeValidUtf8(&pending, /*flush=*/true);
}

}  // namespace rtgen
