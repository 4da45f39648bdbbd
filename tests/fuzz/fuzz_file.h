#pragma once
// Helpers shared by the libFuzzer targets: the readers under test open files by path, so each
// input is written to one scratch file per process (in /dev/shm when it exists, so no disk I/O).

#include <cstddef>
#include <cstdint>
#include <string>

namespace rtgen::fuzz {

// Overwrites this process's scratch file with `data` and returns its path. Aborts (a fuzzer
// finding, not a silent skip) when the file cannot be written.
const std::string& WriteScratchFile(const uint8_t* data, size_t size, const char* suffix);

// The SmolLM2 GGUF the tokenizer and validation targets load once.
std::string ModelPath();

}  // namespace rtgen::fuzz
