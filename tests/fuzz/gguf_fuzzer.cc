// libFuzzer target: GgufFile::Open on arbitrary bytes, then everything a loader does with the
// result — typed metadata lookups, ReadTensorF32 on every tensor, the model config and the
// tokenizer. Any error status is fine; a crash, sanitizer report or leak is a finding.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/model/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = rtgen::fuzz::WriteScratchFile(data, size, ".gguf");
  absl::StatusOr<std::unique_ptr<rtgen::GgufFile>> file = rtgen::GgufFile::Open(path);
  if (!file.ok()) return 0;
  const rtgen::GgufFile& gguf = **file;
  for (const auto& [key, value] : gguf.metadata()) {
    (void)gguf.GetString(key);
    (void)gguf.GetInt(key);
    (void)gguf.GetFloat(key);
    (void)gguf.GetBool(key);
    (void)gguf.GetStringArray(key);
    (void)gguf.GetIntArray(key);
    (void)gguf.GetFloatArray(key);
  }
  for (const rtgen::GgufTensorInfo& info : gguf.tensors()) {
    absl::StatusOr<std::vector<float>> values = gguf.ReadTensorF32(info);
    // A successful read has exactly the element count the header promised.
    if (values.ok() && values->size() != info.num_elements()) __builtin_trap();
    if (gguf.FindTensor(info.name) == nullptr) __builtin_trap();
  }
  absl::StatusOr<rtgen::ModelConfig> config = rtgen::ModelConfig::FromGguf(gguf);
  if (config.ok()) (void)config->Validate();
  (void)rtgen::LoadTokenizerFromGguf(gguf);
  return 0;
}
