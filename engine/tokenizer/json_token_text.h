#pragma once
// The text of a special token as Hugging Face's JSON files write it: a string, or an object with
// "content" (added tokens; tokenizer_config.json's bos_token and eos_token in Llama 2's files).

#include <string>

#include "nlohmann/json.hpp"

namespace rtgen {

// "" when `v` is neither.
inline std::string JsonTokenText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

}  // namespace rtgen
