#include "engine/common/json_nesting.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace rtgen {

size_t JsonNestingDepth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote among them
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<nlohmann::json> ParseJsonChecked(std::string_view text, std::string_view where) {
  if (absl::Status deep = CheckJsonNesting(text, where); !deep.ok()) return deep;
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

absl::Status CheckJsonNesting(std::string_view text, std::string_view where) {
  if (JsonNestingDepth(text) <= kMaxJsonNesting) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(where), ": JSON nested deeper than ", kMaxJsonNesting, " levels"));
}

}  // namespace rtgen
