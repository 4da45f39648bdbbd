#pragma once
// A whole file's bytes, for the small text files a model directory holds (config.json,
// tokenizer.json, a safetensors index) and the server's auth-token and PEM files: one reader for
// every loader.

#include <string>

#include "absl/status/statusor.h"

namespace rtgen {

// The file's bytes; NOT_FOUND "cannot open PATH" when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace rtgen
