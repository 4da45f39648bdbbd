#include "engine/model/gguf_reader.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf_types.h"

namespace rtgen {

namespace {

template <typename T>
T LoadLe(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // GGUF is little-endian, as is every host rtgen targets
  return v;
}

// Smallest encoded size of one array element of `type`, for plausibility checks of lengths.
uint64_t MinElementBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kString:  // uint64 length
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kArray:
      return 8;
  }
  return 1;
}

}  // namespace

absl::Status GgufReader::Need(uint64_t n, const std::string& what) const {
  if (n > size_ - pos_) {
    return absl::DataLossError(absl::StrCat("gguf: truncated while reading ", what));
  }
  return absl::OkStatus();
}

absl::Status GgufReader::ReadU8(uint8_t* v, const std::string& what) {
  RETURN_IF_ERROR(Need(1, what));
  *v = data_[pos_++];
  return absl::OkStatus();
}

absl::Status GgufReader::ReadU32(uint32_t* v, const std::string& what) {
  RETURN_IF_ERROR(Need(4, what));
  *v = LoadLe<uint32_t>(data_ + pos_);
  pos_ += 4;
  return absl::OkStatus();
}

absl::Status GgufReader::ReadU64(uint64_t* v, const std::string& what) {
  RETURN_IF_ERROR(Need(8, what));
  *v = LoadLe<uint64_t>(data_ + pos_);
  pos_ += 8;
  return absl::OkStatus();
}

absl::Status GgufReader::ReadString(std::string* s, const std::string& what) {
  uint64_t len = 0;
  RETURN_IF_ERROR(ReadU64(&len, what));
  if (len > kMaxGgufStringBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: string length ", len, " too large while reading ", what));
  }
  RETURN_IF_ERROR(Need(len, what));
  s->assign(reinterpret_cast<const char*>(data_ + pos_), len);
  pos_ += len;
  return absl::OkStatus();
}

absl::Status GgufReader::ReadScalar(uint32_t type, GgufValue* value, const std::string& what) {
  value->wire_type = type;
  auto need = [&](uint64_t n) { return Need(n, what); };
  const uint8_t* p = data_ + pos_;
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::kUint8:
      RETURN_IF_ERROR(need(1));
      value->value = static_cast<int64_t>(p[0]);
      pos_ += 1;
      return absl::OkStatus();
    case GgufValueType::kInt8:
      RETURN_IF_ERROR(need(1));
      value->value = static_cast<int64_t>(static_cast<int8_t>(p[0]));
      pos_ += 1;
      return absl::OkStatus();
    case GgufValueType::kUint16:
      RETURN_IF_ERROR(need(2));
      value->value = static_cast<int64_t>(LoadLe<uint16_t>(p));
      pos_ += 2;
      return absl::OkStatus();
    case GgufValueType::kInt16:
      RETURN_IF_ERROR(need(2));
      value->value = static_cast<int64_t>(LoadLe<int16_t>(p));
      pos_ += 2;
      return absl::OkStatus();
    case GgufValueType::kUint32:
      RETURN_IF_ERROR(need(4));
      value->value = static_cast<int64_t>(LoadLe<uint32_t>(p));
      pos_ += 4;
      return absl::OkStatus();
    case GgufValueType::kInt32:
      RETURN_IF_ERROR(need(4));
      value->value = static_cast<int64_t>(LoadLe<int32_t>(p));
      pos_ += 4;
      return absl::OkStatus();
    case GgufValueType::kFloat32:
      RETURN_IF_ERROR(need(4));
      value->value = static_cast<double>(LoadLe<float>(p));
      pos_ += 4;
      return absl::OkStatus();
    case GgufValueType::kBool:
      RETURN_IF_ERROR(need(1));
      if (p[0] > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("gguf: bool value ", static_cast<int>(p[0]), " is not 0 or 1 in ", what));
      }
      value->value = p[0] != 0;
      pos_ += 1;
      return absl::OkStatus();
    case GgufValueType::kString: {
      std::string s;
      RETURN_IF_ERROR(ReadString(&s, what));
      value->value = std::move(s);
      return absl::OkStatus();
    }
    case GgufValueType::kUint64: {
      RETURN_IF_ERROR(need(8));
      const uint64_t u = LoadLe<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(
            absl::StrCat("gguf: uint64 value ", u, " does not fit in int64 in ", what));
      }
      value->value = static_cast<int64_t>(u);
      pos_ += 8;
      return absl::OkStatus();
    }
    case GgufValueType::kInt64:
      RETURN_IF_ERROR(need(8));
      value->value = LoadLe<int64_t>(p);
      pos_ += 8;
      return absl::OkStatus();
    case GgufValueType::kFloat64:
      RETURN_IF_ERROR(need(8));
      value->value = LoadLe<double>(p);
      pos_ += 8;
      return absl::OkStatus();
    case GgufValueType::kArray:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: invalid value type ", type, " in ", what));
}

absl::Status GgufReader::ReadValue(GgufValue* value, const std::string& key) {
  const std::string what = absl::StrCat("metadata '", key, "'");
  uint32_t type = 0;
  RETURN_IF_ERROR(ReadU32(&type, what));
  if (type == static_cast<uint32_t>(GgufValueType::kArray)) return ReadArray(value, key);
  return ReadScalar(type, value, what);
}

absl::Status GgufReader::ReadArray(GgufValue* value, const std::string& key) {
  const std::string what = absl::StrCat("metadata '", key, "' (array)");
  uint32_t elem_type = 0;
  uint64_t len = 0;
  RETURN_IF_ERROR(ReadU32(&elem_type, what));
  RETURN_IF_ERROR(ReadU64(&len, what));
  if (elem_type == static_cast<uint32_t>(GgufValueType::kArray)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: nested arrays are not supported (metadata '", key, "')"));
  }
  if (elem_type > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: invalid array element type ",
                                                   elem_type, " in metadata '", key, "'"));
  }
  const GgufValueType et = static_cast<GgufValueType>(elem_type);
  if (len > kMaxGgufArrayLength) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: array length ", len, " exceeds the ",
                                                   kMaxGgufArrayLength,
                                                   "-element limit while reading ", what));
  }
  if (len > remaining() / MinElementBytes(et)) {
    return absl::DataLossError(absl::StrCat("gguf: array length ", len,
                                            " exceeds the file while reading ", what));
  }
  // Collect elements into the vector kind that matches the element type.
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  for (uint64_t i = 0; i < len; ++i) {
    GgufValue elem;
    RETURN_IF_ERROR(ReadScalar(elem_type, &elem, what));
    if (auto* s = std::get_if<std::string>(&elem.value)) {
      strings.push_back(std::move(*s));
    } else if (auto* n = std::get_if<int64_t>(&elem.value)) {
      ints.push_back(*n);
    } else if (auto* f = std::get_if<double>(&elem.value)) {
      floats.push_back(*f);
    } else if (auto* b = std::get_if<bool>(&elem.value)) {
      bools.push_back(*b);
    }
  }
  switch (et) {
    case GgufValueType::kString:
      value->value = GgufValue::Array(std::move(strings));
      break;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      value->value = GgufValue::Array(std::move(floats));
      break;
    case GgufValueType::kBool:
      value->value = GgufValue::Array(std::move(bools));
      break;
    default:
      value->value = GgufValue::Array(std::move(ints));
      break;
  }
  value->wire_type = elem_type;
  return absl::OkStatus();
}

absl::Status GgufReader::ReadTensorInfo(GgufTensorInfo* info, uint64_t index) {
  RETURN_IF_ERROR(ReadString(&info->name, absl::StrCat("tensor info ", index)));
  const std::string what = absl::StrCat("tensor info ", index, " ('", info->name, "')");
  uint32_t n_dims = 0;
  RETURN_IF_ERROR(ReadU32(&n_dims, what));
  if (n_dims == 0 || n_dims > kMaxGgufDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: ", what, " has ", n_dims, " dims (want 1..", kMaxGgufDims, ")"));
  }
  info->dims.clear();
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    RETURN_IF_ERROR(ReadU64(&dim, what));
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: ", what, " has an invalid dim ", dim));
    }
    info->dims.push_back(static_cast<int64_t>(dim));
  }
  RETURN_IF_ERROR(ReadU32(&info->type, what));
  RETURN_IF_ERROR(ReadU64(&info->offset, what));
  return absl::OkStatus();
}

}  // namespace rtgen
