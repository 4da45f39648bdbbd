#pragma once
// Helpers shared by the model tests: temporary files and the path of the real model.

#include <string>

#include "tests/unique_temp_path.h"  // UniqueTempPath, for files the tests write themselves

namespace rtgen::testing {

inline constexpr const char* kSmolLm2Path =
    RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// Writes `bytes` to a new temp file and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& bytes);

}  // namespace rtgen::testing
