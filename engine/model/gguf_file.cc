#include "engine/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>


#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/gguf_reader.h"
#include "engine/model/gguf_types.h"

namespace rtgen {

uint64_t GgufTensorInfo::num_elements() const {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n;
}

GgufFile::~GgufFile() {
  if (data_ != nullptr && size_ > 0) {
    munmap(const_cast<uint8_t*>(data_), size_);
  }
}

namespace {

// Maps `path` read-only. An empty file maps to (nullptr, 0).
absl::Status MapFile(const std::string& path, const uint8_t** data, uint64_t* size) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string msg = absl::StrCat("gguf: cannot open '", path, "': ", strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string msg = absl::StrCat("gguf: cannot stat '", path, "': ", strerror(errno));
    close(fd);
    return absl::InvalidArgumentError(msg);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("gguf: '", path, "' is not a regular file"));
  }
  *size = static_cast<uint64_t>(st.st_size);
  *data = nullptr;
  if (*size > 0) {
    void* p = mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string msg = absl::StrCat("gguf: cannot mmap '", path, "': ", strerror(errno));
      close(fd);
      return absl::InvalidArgumentError(msg);
    }
    *data = static_cast<const uint8_t*>(p);
  }
  close(fd);
  return absl::OkStatus();
}

absl::Status TypeMismatch(const std::string& key, const char* want) {
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: metadata key '", key, "' is not ", want));
}

// Two tensors' data must not share bytes (llama.cpp writes them one after another): a corrupt
// offset would otherwise load one tensor's bytes as another's, silently. Bounds are checked
// before this.
absl::Status CheckNoOverlap(const std::vector<GgufTensorInfo>& tensors) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // tensor i's [offset, end)
  std::vector<size_t> order(tensors.size());
  spans.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSIGN_OR_RETURN(uint64_t bytes, GgmlTensorBytes(tensors[i]));
    spans.emplace_back(tensors[i].offset, tensors[i].offset + bytes);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return spans[a].first < spans[b].first; });
  for (size_t k = 1; k < order.size(); ++k) {
    const size_t prev = order[k - 1], cur = order[k];
    if (spans[cur].first < spans[prev].second) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: data of tensor '", tensors[cur].name,
                                                     "' overlaps tensor '", tensors[prev].name,
                                                     "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  RETURN_IF_ERROR(MapFile(path, &file->data_, &file->size_));
  GgufReader r(file->data_, file->size_);

  // Header.
  uint32_t magic = 0;
  RETURN_IF_ERROR(r.ReadU32(&magic, "magic"));
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: bad magic in '", path, "'"));
  }
  RETURN_IF_ERROR(r.ReadU32(&file->version_, "version"));
  if (file->version_ != 2 && file->version_ != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: unsupported version ", file->version_, " (want 2 or 3)"));
  }
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  RETURN_IF_ERROR(r.ReadU64(&tensor_count, "tensor_count"));
  RETURN_IF_ERROR(r.ReadU64(&kv_count, "kv_count"));
  // Every tensor info and key-value pair takes at least 8 bytes, so a count larger than the
  // file can only be corruption; it would otherwise drive a huge loop or allocation.
  if (tensor_count > kMaxGgufTensors || tensor_count > file->size_ / 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: tensor_count ", tensor_count, " is implausible for a file of ",
                     file->size_, " bytes"));
  }
  if (kv_count > kMaxGgufKeys || kv_count > file->size_ / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gguf: kv_count ", kv_count, " is implausible for a file of ", file->size_, " bytes"));
  }

  // Metadata.
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    RETURN_IF_ERROR(r.ReadString(&key, absl::StrCat("metadata key ", i)));
    GgufValue value;
    RETURN_IF_ERROR(r.ReadValue(&value, key));
    if (!file->metadata_.emplace(key, std::move(value)).second) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: duplicate metadata key '", key, "'"));
    }
  }

  uint64_t alignment = kGgufDefaultAlignment;
  if (auto it = file->metadata_.find("general.alignment"); it != file->metadata_.end()) {
    const int64_t* a = std::get_if<int64_t>(&it->second.value);
    if (a == nullptr || *a <= 0 || (*a & (*a - 1)) != 0 || *a > (1 << 20)) {
      return absl::InvalidArgumentError(
          "gguf: general.alignment must be a power-of-two integer no larger than 1 MiB");
    }
    alignment = static_cast<uint64_t>(*a);
  }

  // Tensor infos, indexed by name: duplicates are found, and FindTensor answers, without
  // comparing a name with every other (minutes for a small file of 2^20 tensor entries).
  file->tensors_.reserve(tensor_count);
  file->tensor_index_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    RETURN_IF_ERROR(r.ReadTensorInfo(&info, i));
    if (!file->tensor_index_.emplace(info.name, file->tensors_.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: duplicate tensor name '", info.name, "'"));
    }
    if (info.offset % alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", info.name, "' offset ",
                                                     info.offset, " is not aligned to ",
                                                     alignment));
    }
    file->tensors_.push_back(std::move(info));
  }

  // Data section: starts at the next multiple of `alignment`.
  const uint64_t header_end = r.position();
  file->data_offset_ = (header_end + alignment - 1) / alignment * alignment;
  if (tensor_count > 0 && file->data_offset_ > file->size_) {
    return absl::DataLossError("gguf: truncated before the tensor data section");
  }
  for (const GgufTensorInfo& t : file->tensors_) {
    ASSIGN_OR_RETURN(uint64_t bytes, GgmlTensorBytes(t));
    const uint64_t available = file->size_ - file->data_offset_;
    if (t.offset > available || bytes > available - t.offset) {
      return absl::DataLossError(absl::StrCat("gguf: data of tensor '", t.name, "' (offset ",
                                              t.offset, ", ", bytes,
                                              " bytes) lies outside the file"));
    }
  }
  RETURN_IF_ERROR(CheckNoOverlap(file->tensors_));
  return file;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

template <typename T>
absl::StatusOr<T> GetScalar(const std::map<std::string, GgufValue>& metadata,
                            const std::string& key, const char* want) {
  auto it = metadata.find(key);
  if (it == metadata.end()) {
    return absl::NotFoundError(absl::StrCat("gguf: metadata key '", key, "' not found"));
  }
  const T* v = std::get_if<T>(&it->second.value);
  if (v == nullptr) return TypeMismatch(key, want);
  return *v;
}

template <typename T>
absl::StatusOr<std::vector<T>> GetArray(const std::map<std::string, GgufValue>& metadata,
                                        const std::string& key, const char* want) {
  auto it = metadata.find(key);
  if (it == metadata.end()) {
    return absl::NotFoundError(absl::StrCat("gguf: metadata key '", key, "' not found"));
  }
  const GgufValue::Array* arr = std::get_if<GgufValue::Array>(&it->second.value);
  if (arr == nullptr) return TypeMismatch(key, want);
  const std::vector<T>* v = std::get_if<std::vector<T>>(arr);
  if (v == nullptr) return TypeMismatch(key, want);
  return *v;
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  return GetScalar<std::string>(metadata_, key, "a string");
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  return GetScalar<int64_t>(metadata_, key, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it != metadata_.end()) {
    if (const int64_t* i = std::get_if<int64_t>(&it->second.value)) {
      return static_cast<double>(*i);
    }
  }
  return GetScalar<double>(metadata_, key, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  return GetScalar<bool>(metadata_, key, "a bool");
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  return GetArray<std::string>(metadata_, key, "an array of strings");
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  return GetArray<int64_t>(metadata_, key, "an array of integers");
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  return GetArray<double>(metadata_, key, "an array of floats");
}

absl::StatusOr<std::span<const uint8_t>> GgufFile::TensorBytes(const GgufTensorInfo& info) const {
  ASSIGN_OR_RETURN(uint64_t bytes, GgmlTensorBytes(info));
  const uint64_t available = size_ - std::min(size_, data_offset_);
  if (info.offset > available || bytes > available - info.offset) {
    return absl::DataLossError(
        absl::StrCat("gguf: data of tensor '", info.name, "' lies outside the file"));
  }
  return std::span<const uint8_t>(data_ + data_offset_ + info.offset, bytes);
}

absl::StatusOr<std::vector<float>> GgufFile::ReadTensorF32(const GgufTensorInfo& info) const {
  ASSIGN_OR_RETURN(std::span<const uint8_t> stored, TensorBytes(info));
  const uint8_t* src = stored.data();
  const uint64_t n = info.num_elements();
  // The type first: an unsupported one (Q4_K's token_embd of a Llama-3-8B file) allocated and
  // zeroed the whole fp32 output, 2.1 GB, before it was refused.
  if (!IsDequantizable(info.type)) {
    return absl::UnimplementedError(absl::StrCat("gguf: unsupported tensor type ", info.type,
                                                 " (", GgmlTypeName(info.type), ") for '",
                                                 info.name, "'"));
  }
  std::vector<float> out(n);
  switch (static_cast<GgmlType>(info.type)) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(out.data(), src, n * sizeof(float));
      break;
    case GgmlType::kF16:
      for (uint64_t i = 0; i < n; ++i) out[i] = LoadFp16(src + 2 * i);
      break;
    case GgmlType::kBF16:
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = Bf16ToFp32(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      }
      break;
    case GgmlType::kQ8_0:
      DequantizeQ8_0(src, static_cast<int64_t>(n / kGgmlBlockSize), out.data());
      break;
    case GgmlType::kQ4_0:
      DequantizeQ4_0(src, static_cast<int64_t>(n / kGgmlBlockSize), out.data());
      break;
    case GgmlType::kQ4_1:
      DequantizeQ4_1(src, static_cast<int64_t>(n / kGgmlBlockSize), out.data());
      break;
    default:
      break;  // refused above (IsDequantizable)
  }
  return out;
}

}  // namespace rtgen
