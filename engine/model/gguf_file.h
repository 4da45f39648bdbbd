#pragma once
// A memory-mapped GGUF file (v2/v3): header, metadata, tensor infos.
// Every offset and length is bounds-checked against the file size before it is read: a truncated
// or corrupt file gives an error naming what is wrong, never an out-of-bounds read.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace rtgen {

enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kBF16 = 30,
};

// One metadata value. Arrays keep their element type: strings, integers (widened to int64),
// floats (widened to double) or bools.
struct GgufValue {
  using Array = std::variant<std::vector<std::string>, std::vector<int64_t>, std::vector<double>,
                             std::vector<bool>>;
  std::variant<std::string, int64_t, double, bool, Array> value;
  // The GGUF value type id as read from a file (an array's: its element type), so a copy writes
  // the same type (GgufWriter::AddValue); unset for a value made in code.
  std::optional<uint32_t> wire_type;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the fastest-varying (row length)
  uint32_t type = 0;          // raw ggml type id; see GgmlType
  uint64_t offset = 0;        // relative to the data section start
  uint64_t num_elements() const;
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();

  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed metadata lookups: NOT_FOUND when absent, INVALID_ARGUMENT on a type mismatch,
  // both naming the key.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;  // also accepts integers
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;

  // Dequantises one tensor to fp32 (F32, F16, BF16, Q8_0, Q4_0, Q4_1), in file order.
  absl::StatusOr<std::vector<float>> ReadTensorF32(const GgufTensorInfo& info) const;
  // The tensor's bytes as stored (bounds-checked); valid while the file is open.
  absl::StatusOr<std::span<const uint8_t>> TensorBytes(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;  // name -> index in tensors_
  const uint8_t* data_ = nullptr;  // mapped file
  uint64_t size_ = 0;              // bytes mapped
  uint64_t data_offset_ = 0;       // start of the tensor data section (aligned)
};

}  // namespace rtgen
