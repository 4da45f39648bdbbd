#pragma once
// Builds a GGUF (v3 by default) file in memory: metadata and tensors, quantising fp32 data to
// the requested ggml type. For tests (small models, corrupt files) and rtgen-synth-model.
// Metadata keys and tensors are written in the order they were added.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/gguf_file.h"

namespace rtgen {

class GgufWriter {
 public:
  GgufWriter() = default;

  void set_version(uint32_t version) { version_ = version; }
  // Data section alignment; also written as the `general.alignment` key when not 32.
  void set_alignment(uint32_t alignment) { alignment_ = alignment; }

  void AddString(const std::string& key, const std::string& value);
  void AddUint32(const std::string& key, uint32_t value);
  void AddInt32(const std::string& key, int32_t value);
  void AddUint64(const std::string& key, uint64_t value);
  void AddInt64(const std::string& key, int64_t value);
  void AddFloat32(const std::string& key, float value);
  void AddFloat64(const std::string& key, double value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& values);
  void AddFloat32Array(const std::string& key, const std::vector<float>& values);
  // A value read from another file, written with the type it was read with
  // (GgufValue::wire_type); a value made in code: integers as int32 when they fit (int64
  // otherwise), floats as float32.
  void AddValue(const std::string& key, const GgufValue& value);
  // Escape hatch for tests: a key with an arbitrary value type id and raw payload bytes.
  void AddRawValue(const std::string& key, uint32_t type, const std::string& payload);

  // Adds a tensor of GGUF dims (dims[0] = row length) from fp32 `data`, converted to `type`
  // (F32, F16, BF16, Q8_0, Q4_0 or Q4_1; quantised types need dims[0] % 32 == 0).
  absl::Status AddTensor(const std::string& name, const std::vector<int64_t>& dims,
                         GgmlType type, const std::vector<float>& data);
  // Adds a tensor whose fp32 data `produce` returns only when the file is written, so that a
  // large model never has to be in memory at once. `produce` must return num_elements values.
  absl::Status AddTensorLazy(const std::string& name, const std::vector<int64_t>& dims,
                             GgmlType type, std::function<std::vector<float>()> produce);
  // Adds a tensor from raw bytes of any type id, unchecked (for tests).
  void AddRawTensor(const std::string& name, const std::vector<int64_t>& dims, uint32_t type,
                    const std::string& bytes);

  // The whole file in memory (lazy tensors are produced here). INVALID_ARGUMENT when a lazy
  // producer returns the wrong number of values.
  absl::StatusOr<std::string> Serialize() const;
  // Streams the file to `path`, one tensor in memory at a time.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type;
    uint64_t size;                                // bytes of data
    std::string bytes;                            // when not lazy
    std::function<std::vector<float>()> produce;  // when lazy
  };

  // Everything before the data section.
  std::string Header() const;
  // The data of tensor `t`.
  absl::StatusOr<std::string> TensorBytes(const Tensor& t) const;

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  uint64_t kv_count_ = 0;
  std::string kv_bytes_;  // encoded key/value pairs
  std::vector<Tensor> tensors_;
};

// Converts fp32 values to the bytes of ggml `type` (n must be a multiple of 32 for quantised
// types). INVALID_ARGUMENT for other types or a bad length.
absl::StatusOr<std::string> EncodeGgmlTensor(GgmlType type, const std::vector<float>& data);

}  // namespace rtgen
