#pragma once
// Which Llama shapes the CUDA backend runs, checked at Create (and by the random-weights path)
// so a shape no kernel takes is refused there by name, not at graph capture with a bare CUDA
// error. Host code without CUDA, tested by the CPU-only CI.

#include "absl/status/status.h"
#include "engine/model/model_config.h"

namespace rtgen {

// OK when `config` is a Llama shape the CUDA kernels support: positive sizes, heads a multiple of
// kv heads, and head_dim a multiple of 8 up to 256 (decode attention reads a head in 16-byte
// pieces and holds at most 256 of its elements); otherwise an error naming the first bad field.
absl::Status CheckDeviceConfig(const ModelConfig& config);

}  // namespace rtgen
