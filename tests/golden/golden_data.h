#pragma once
// Reads the checked-in golden data made by scripts/golden/make_logits_golden.py (transformers,
// fp32, the same SmolLM2 GGUF).

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace rtgen::testing {

inline constexpr char kSmolLm2Path[] = RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr char kGoldenDir[] = RTGEN_SOURCE_DIR "/tests/golden/data";

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;
  std::vector<float> logits;  // next-token logits after the prompt, [vocab]
};

inline std::vector<GoldenCase> ReadGoldenCases() {
  std::ifstream meta_in(std::string(kGoldenDir) + "/logits.json");
  std::stringstream text;
  text << meta_in.rdbuf();
  nlohmann::json meta = nlohmann::json::parse(text.str());
  const int64_t vocab = meta["vocab_size"];
  std::ifstream logits_in(std::string(kGoldenDir) + "/logits.f32", std::ios::binary);
  std::vector<GoldenCase> cases;
  for (const auto& c : meta["cases"]) {
    GoldenCase g;
    g.prompt = c["prompt"];
    g.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    g.greedy_ids = c["greedy_ids"].get<std::vector<int32_t>>();
    g.logits.resize(vocab);
    logits_in.read(reinterpret_cast<char*>(g.logits.data()), vocab * sizeof(float));
    if (!logits_in) return {};
    cases.push_back(std::move(g));
  }
  return cases;
}

}  // namespace rtgen::testing
