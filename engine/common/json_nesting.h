#pragma once
// JSON files from outside (config.json, tokenizer.json, safetensors headers) are checked for
// nesting before they are parsed: nlohmann::json parses and frees deep nesting without
// recursion, but copying or dumping a value recurses once a level, so a file of 100,000 nested
// '[' crashed the loader with a stack overflow where it should refuse the file.

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace rtgen {

// The deepest '[' / '{' nesting of `text`, brackets inside strings not counted. Linear, no
// recursion; malformed text is measured as far as it goes (the parser reports it).
size_t JsonNestingDepth(std::string_view text);

// Deeper than any model file's (a tokenizer.json's merges are 3 levels; an HF config's 3).
inline constexpr size_t kMaxJsonNesting = 64;

// OK, or InvalidArgument "<where>: JSON nested deeper than 64 levels" (checked before parsing).
absl::Status CheckJsonNesting(std::string_view text, std::string_view where);

// A file's JSON: CheckJsonNesting's error, else `text` parsed without exceptions (text that is
// not JSON comes back discarded, is_discarded(), for the caller's own message). Every parse of
// a whole file goes through here.
absl::StatusOr<nlohmann::json> ParseJsonChecked(std::string_view text, std::string_view where);

}  // namespace rtgen
