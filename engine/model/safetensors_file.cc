#include "engine/model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/json_nesting.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"
#include "nlohmann/json.hpp"

namespace rtgen {

namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB

// Bytes per element of a safetensors dtype; 0 when unknown.
uint64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", path, ": ", what));
}

absl::StatusOr<SafetensorsTensor> ParseEntry(const std::string& path, const std::string& name,
                                             const Json& e, uint64_t data_size) {
  const std::string t = absl::StrCat("tensor '", name, "'");
  if (!e.is_object()) return Bad(path, t + " is not an object");
  SafetensorsTensor st;
  st.name = name;
  auto dtype = e.find("dtype");
  if (dtype == e.end() || !dtype->is_string()) return Bad(path, t + " has no string dtype");
  st.dtype = dtype->get<std::string>();
  const uint64_t elem_bytes = DtypeBytes(st.dtype);
  if (elem_bytes == 0) return Bad(path, absl::StrCat(t, " has unknown dtype '", st.dtype, "'"));
  auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) return Bad(path, t + " has no shape array");
  if (shape->size() > 8) return Bad(path, t + " has too many dims");
  uint64_t n = 1;
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) return Bad(path, t + " has a non-integer or negative dim");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (v != 0 && n > std::numeric_limits<uint64_t>::max() / elem_bytes / v)) {
      return Bad(path, t + " element count overflows");
    }
    n *= v;
    st.shape.push_back(static_cast<int64_t>(v));
  }
  auto offsets = e.find("data_offsets");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return Bad(path, t + " needs data_offsets [begin, end]");
  }
  st.begin = (*offsets)[0].get<uint64_t>();
  st.end = (*offsets)[1].get<uint64_t>();
  if (st.begin > st.end || st.end > data_size) {
    return Bad(path, absl::StrCat(t, " data_offsets [", st.begin, ", ", st.end,
                                  "] lie outside the data section of ", data_size, " bytes"));
  }
  if (st.end - st.begin != n * elem_bytes) {
    return Bad(path, absl::StrCat(t, " holds ", st.end - st.begin, " bytes, its shape and dtype ",
                                  "need ", n * elem_bytes));
  }
  return st;
}

}  // namespace

uint64_t SafetensorsTensor::num_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(const_cast<uint8_t*>(map_), size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string msg = absl::StrCat("safetensors: cannot open ", path, ": ", strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Bad(path, "not a regular file");
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ < 8) {
    close(fd);
    return absl::DataLossError(absl::StrCat("safetensors: ", path, ": truncated header length"));
  }
  void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Bad(path, absl::StrCat("mmap failed: ", strerror(errno)));
  f->map_ = static_cast<const uint8_t*>(p);

  uint64_t header_len = 0;
  std::memcpy(&header_len, f->map_, 8);  // little-endian
  if (header_len > kMaxHeaderBytes) {
    return Bad(path, absl::StrCat("header length ", header_len, " is too large"));
  }
  if (header_len > f->size_ - 8) {
    return absl::DataLossError(absl::StrCat("safetensors: ", path, ": header of ", header_len,
                                            " bytes runs past the end of the file"));
  }
  f->data_offset_ = 8 + header_len;
  const uint64_t data_size = f->size_ - f->data_offset_;
  const char* h = reinterpret_cast<const char*>(f->map_ + 8);
  // A repeated top-level key would be overwritten by the parser (the last entry wins, the first
  // one's bytes left unchecked): seen here, where the keys still arrive one by one.
  absl::flat_hash_set<std::string> keys;
  std::string duplicate;
  auto note_keys = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  if (absl::Status deep = CheckJsonNesting(std::string_view(h, header_len), "header");
      !deep.ok()) {
    return Bad(path, std::string(deep.message()));
  }
  Json header = Json::parse(h, h + header_len, note_keys, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Bad(path, "header is not valid JSON");
  if (!header.is_object()) return Bad(path, "header is not a JSON object");
  if (!duplicate.empty()) return Bad(path, absl::StrCat("duplicate tensor '", duplicate, "'"));
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    ASSIGN_OR_RETURN(SafetensorsTensor t, ParseEntry(path, name, entry, data_size));
    f->tensors_.emplace(name, std::move(t));
  }
  // Tensors must not share bytes.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& [name, t] : f->tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
              return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return Bad(path, absl::StrCat("tensors '", by_offset[i - 1]->name, "' and '",
                                    by_offset[i]->name, "' overlap"));
    }
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::vector<float>> SafetensorsFile::ReadF32(const SafetensorsTensor& t) const {
  // Offsets were validated on Open; re-check in case `t` did not come from this file.
  if (t.begin > t.end || t.end > size_ - data_offset_) {
    return Bad(path_, absl::StrCat("tensor '", t.name, "' lies outside the file"));
  }
  const uint8_t* src = map_ + data_offset_ + t.begin;
  const uint64_t n = t.num_elements();
  const uint64_t bytes = t.end - t.begin;
  std::vector<float> out;
  if (t.dtype == "F32" && bytes == n * 4) {
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), src, n * 4);
  } else if ((t.dtype == "F16" || t.dtype == "BF16") && bytes == n * 2) {
    out.resize(n);
    const bool f16 = t.dtype == "F16";
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t h = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
      out[i] = f16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
    }
  } else {
    return absl::UnimplementedError(absl::StrCat("safetensors: tensor '", t.name, "' has dtype ",
                                                 t.dtype, " (want F32, F16 or BF16)"));
  }
  return out;
}

}  // namespace rtgen
