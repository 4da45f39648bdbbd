#pragma once
// A bounds-checked little-endian cursor over a GGUF file's bytes. Every read checks the bytes
// are there first; running past the end is DATA_LOSS "gguf: truncated while reading <what>".

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/model/gguf_file.h"

namespace rtgen {

class GgufReader {
 public:
  GgufReader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status ReadU8(uint8_t* v, const std::string& what);
  absl::Status ReadU32(uint32_t* v, const std::string& what);
  absl::Status ReadU64(uint64_t* v, const std::string& what);
  // uint64 length + bytes; length limited by kMaxGgufStringBytes and the bytes left.
  absl::Status ReadString(std::string* s, const std::string& what);
  // A typed metadata value (type id then payload) for metadata key `key`.
  absl::Status ReadValue(GgufValue* value, const std::string& key);
  // One tensor info record (name, n_dims, dims, type, offset); `index` is for messages.
  absl::Status ReadTensorInfo(GgufTensorInfo* info, uint64_t index);

 private:
  absl::Status Need(uint64_t n, const std::string& what) const;
  // Reads one scalar of GGUF value type `type` into `value` (arrays are not scalars).
  absl::Status ReadScalar(uint32_t type, GgufValue* value, const std::string& what);
  absl::Status ReadArray(GgufValue* value, const std::string& key);

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace rtgen
