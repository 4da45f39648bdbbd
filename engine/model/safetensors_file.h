#pragma once
// A memory-mapped `.safetensors` file: 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
// The header is fully validated on Open (bounds, sizes, overlaps), so reads never leave the file.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rtgen {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // "F32", "F16", "BF16", ... as in the header
  std::vector<int64_t> shape;   // row-major, outermost first
  uint64_t begin = 0;           // byte offsets relative to the data section
  uint64_t end = 0;
  uint64_t num_elements() const;
};

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(const std::string& name) const;
  // Converts F32, F16 or BF16 data to fp32; UNIMPLEMENTED for other dtypes.
  absl::StatusOr<std::vector<float>> ReadF32(const SafetensorsTensor& tensor) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::map<std::string, SafetensorsTensor> tensors_;
  const uint8_t* map_ = nullptr;  // whole file
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;      // 8 + header length
};

}  // namespace rtgen
