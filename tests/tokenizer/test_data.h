#pragma once
// Shared fixtures for the tokenizer tests: the SmolLM2 tokenizer (loaded once) and the golden
// JSON-lines files written by scripts/golden/make_tokenizer_golden.py.

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace rtgen::testing {

inline constexpr char kSmolLmGguf[] = RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr char kGoldenDir[] = RTGEN_SOURCE_DIR "/tests/golden/data";

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// The SmolLM2 GGUF tokenizer, loaded once per test binary; fails the test when it cannot load.
inline const Tokenizer& SmolLmTokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    std::unique_ptr<Tokenizer> t;
    auto file = GgufFile::Open(kSmolLmGguf);
    if (!file.ok()) {
      ADD_FAILURE() << file.status();
      return t;
    }
    auto loaded = LoadTokenizerFromGguf(**file);
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      return t;
    }
    return std::move(loaded).value();
  }();
  if (tokenizer == nullptr) {
    throw std::runtime_error("SmolLM2 tokenizer did not load");  // fails the calling test
  }
  return *tokenizer;
}

inline std::vector<int32_t> Ids(const nlohmann::json& array) {
  return array.get<std::vector<int32_t>>();
}

}  // namespace rtgen::testing
