#pragma once
// GGUF format constants and the ggml tensor type table (block sizes and bytes per block).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/gguf_file.h"

namespace rtgen {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint64_t kGgufDefaultAlignment = 32;

// Sanity limits: anything larger is treated as corruption rather than allocated.
inline constexpr uint64_t kMaxGgufTensors = 1 << 20;
inline constexpr uint64_t kMaxGgufKeys = 1 << 20;
inline constexpr uint64_t kMaxGgufStringBytes = 1ull << 30;
// Elements of one metadata array. Each is held widened (an int64, a double or a string), so a
// file's bytes of uint8 elements would take 8 times as much memory: 16 Mi elements is far past
// any tokenizer's (~256 Ki tokens or merges) and bounds that to 128 MiB.
inline constexpr uint64_t kMaxGgufArrayLength = 1ull << 24;
inline constexpr uint32_t kMaxGgufDims = 4;

// Metadata value type ids of the GGUF format.
enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

struct GgmlTypeTraits {
  const char* name = nullptr;  // nullptr for an unknown type id
  int64_t block_size = 0;      // elements per block
  int64_t block_bytes = 0;     // bytes per block
};

// Traits of a ggml type id; name == nullptr when rtgen does not know the type.
GgmlTypeTraits GetGgmlTypeTraits(uint32_t type);
// "Q6_K" etc., or "unknown".
std::string GgmlTypeName(uint32_t type);
// True for the types ReadTensorF32 can dequantise.
bool IsDequantizable(uint32_t type);
// Bytes of a tensor's data: checks the type is known, that dims[0] is a multiple of its block
// size and that the size does not overflow. Errors name the tensor.
absl::StatusOr<uint64_t> GgmlTensorBytes(const GgufTensorInfo& info);

}  // namespace rtgen
