#pragma once
// Helpers shared by the model tests: temporary files and the path of the real model.

#include <string>

namespace rtgen::testing {

inline constexpr const char* kSmolLm2Path =
    RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// A fresh path under the test temp dir; `name` makes it readable in failures.
std::string TempPath(const std::string& name);
// Writes `bytes` to a new temp file and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& bytes);

}  // namespace rtgen::testing
