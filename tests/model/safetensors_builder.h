#pragma once
// Safetensors bytes built by the tests themselves (independent of the reader under test): named
// tensors of F32, F16 or BF16 values, a header with their offsets, and the data after it.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/ggml_dequant.h"
#include "nlohmann/json.hpp"

namespace rtgen::testing {

class SafetensorsBuilder {
 public:
  void Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           const std::vector<float>& values) {
    std::string bytes;
    for (float v : values) {
      if (dtype == "F32") {
        bytes.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t h = dtype == "F16" ? Fp32ToFp16(v) : Fp32ToBf16(v);
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header_[name] = {{"dtype", dtype},
                     {"shape", shape},
                     {"data_offsets", {data_.size(), data_.size() + bytes.size()}}};
    data_ += bytes;
  }
  nlohmann::json& header() { return header_; }
  std::string Bytes() const {
    const std::string h = header_.dump();
    const uint64_t n = h.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + h + data_;
  }

 private:
  nlohmann::json header_ = nlohmann::json::object();
  std::string data_;
};

}  // namespace rtgen::testing
