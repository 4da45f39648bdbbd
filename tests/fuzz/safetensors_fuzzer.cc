// libFuzzer target: SafetensorsFile::Open (8-byte length + JSON header) on arbitrary bytes,
// then ReadF32 on every tensor the header describes. Errors are fine; crashes are findings.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/model/safetensors_file.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = rtgen::fuzz::WriteScratchFile(data, size, ".safetensors");
  absl::StatusOr<std::unique_ptr<rtgen::SafetensorsFile>> file =
      rtgen::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  for (const auto& [name, tensor] : (*file)->tensors()) {
    if ((*file)->Find(name) == nullptr) __builtin_trap();
    // Open promised: the byte range lies inside the data section and matches the shape.
    if (tensor.end < tensor.begin) __builtin_trap();
    absl::StatusOr<std::vector<float>> values = (*file)->ReadF32(tensor);
    if (values.ok() && values->size() != tensor.num_elements()) __builtin_trap();
  }
  return 0;
}
