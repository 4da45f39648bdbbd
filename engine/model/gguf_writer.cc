#include "engine/model/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/ggml_quant.h"
#include "engine/model/gguf_types.h"

namespace rtgen {

namespace {

template <typename T>
void Put(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));  // little-endian host
  out->append(buf, sizeof(T));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

uint32_t TypeId(GgufValueType t) { return static_cast<uint32_t>(t); }

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// Appends `v` as GGUF type `t`; false where `t` is not a number type (nothing appended).
bool PutNumber(std::string* out, uint32_t t, int64_t v) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::kUint8: Put<uint8_t>(out, static_cast<uint8_t>(v)); return true;
    case GgufValueType::kInt8: Put<int8_t>(out, static_cast<int8_t>(v)); return true;
    case GgufValueType::kUint16: Put<uint16_t>(out, static_cast<uint16_t>(v)); return true;
    case GgufValueType::kInt16: Put<int16_t>(out, static_cast<int16_t>(v)); return true;
    case GgufValueType::kUint32: Put<uint32_t>(out, static_cast<uint32_t>(v)); return true;
    case GgufValueType::kInt32: Put<int32_t>(out, static_cast<int32_t>(v)); return true;
    case GgufValueType::kUint64: Put<uint64_t>(out, static_cast<uint64_t>(v)); return true;
    case GgufValueType::kInt64: Put<int64_t>(out, v); return true;
    default: return false;
  }
}
bool PutNumber(std::string* out, uint32_t t, double v) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::kFloat32: Put<float>(out, static_cast<float>(v)); return true;
    case GgufValueType::kFloat64: Put<double>(out, v); return true;
    default: return false;
  }
}

// Numbers (or an array of them) encoded as `value.wire_type` (set): the type id to write and the
// payload, or false where the value is not a number (array) of such a type.
bool EncodeAsRead(const GgufValue& value, uint32_t* type, std::string* payload) {
  const uint32_t t = *value.wire_type;
  payload->clear();
  if (const auto* i = std::get_if<int64_t>(&value.value)) {
    *type = t;
    return PutNumber(payload, t, *i);
  }
  if (const auto* d = std::get_if<double>(&value.value)) {
    *type = t;
    return PutNumber(payload, t, *d);
  }
  const auto* arr = std::get_if<GgufValue::Array>(&value.value);
  if (arr == nullptr) return false;
  *type = TypeId(GgufValueType::kArray);
  const auto put_all = [&](const auto& elements) {
    Put<uint32_t>(payload, t);
    Put<uint64_t>(payload, elements.size());
    for (const auto v : elements) {
      if (!PutNumber(payload, t, v)) return false;
    }
    return true;
  };
  if (const auto* is = std::get_if<std::vector<int64_t>>(arr)) return put_all(*is);
  if (const auto* ds = std::get_if<std::vector<double>>(arr)) return put_all(*ds);
  return false;  // strings and bools have one encoding each
}

}  // namespace

void GgufWriter::AddRawValue(const std::string& key, uint32_t type, const std::string& payload) {
  PutString(&kv_bytes_, key);
  Put<uint32_t>(&kv_bytes_, type);
  kv_bytes_.append(payload);
  ++kv_count_;
}

void GgufWriter::AddString(const std::string& key, const std::string& value) {
  std::string p;
  PutString(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kString), p);
}

void GgufWriter::AddUint32(const std::string& key, uint32_t value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kUint32), p);
}

void GgufWriter::AddInt32(const std::string& key, int32_t value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kInt32), p);
}

void GgufWriter::AddUint64(const std::string& key, uint64_t value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kUint64), p);
}

void GgufWriter::AddInt64(const std::string& key, int64_t value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kInt64), p);
}

void GgufWriter::AddFloat32(const std::string& key, float value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kFloat32), p);
}

void GgufWriter::AddFloat64(const std::string& key, double value) {
  std::string p;
  Put(&p, value);
  AddRawValue(key, TypeId(GgufValueType::kFloat64), p);
}

void GgufWriter::AddBool(const std::string& key, bool value) {
  AddRawValue(key, TypeId(GgufValueType::kBool), std::string(1, value ? '\1' : '\0'));
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::string p;
  Put<uint32_t>(&p, TypeId(GgufValueType::kString));
  Put<uint64_t>(&p, values.size());
  for (const std::string& s : values) PutString(&p, s);
  AddRawValue(key, TypeId(GgufValueType::kArray), p);
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  std::string p;
  Put<uint32_t>(&p, TypeId(GgufValueType::kInt32));
  Put<uint64_t>(&p, values.size());
  for (int32_t v : values) Put(&p, v);
  AddRawValue(key, TypeId(GgufValueType::kArray), p);
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& values) {
  std::string p;
  Put<uint32_t>(&p, TypeId(GgufValueType::kFloat32));
  Put<uint64_t>(&p, values.size());
  for (float v : values) Put(&p, v);
  AddRawValue(key, TypeId(GgufValueType::kArray), p);
}

void GgufWriter::AddValue(const std::string& key, const GgufValue& value) {
  // A value read from a file keeps its type (llama.cpp refuses e.g. token ids not UINT32).
  uint32_t type = 0;
  std::string payload;
  if (value.wire_type && EncodeAsRead(value, &type, &payload)) {
    AddRawValue(key, type, payload);
    return;
  }
  if (const auto* s = std::get_if<std::string>(&value.value)) {
    AddString(key, *s);
  } else if (const auto* i = std::get_if<int64_t>(&value.value)) {
    if (FitsInt32(*i)) {
      AddInt32(key, static_cast<int32_t>(*i));
    } else {
      AddInt64(key, *i);
    }
  } else if (const auto* d = std::get_if<double>(&value.value)) {
    AddFloat32(key, static_cast<float>(*d));
  } else if (const auto* b = std::get_if<bool>(&value.value)) {
    AddBool(key, *b);
  } else if (const auto* arr = std::get_if<GgufValue::Array>(&value.value)) {
    std::string p;
    if (const auto* ss = std::get_if<std::vector<std::string>>(arr)) {
      AddStringArray(key, *ss);
      return;
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(arr)) {
      bool all32 = true;
      for (int64_t v : *is) all32 = all32 && FitsInt32(v);
      Put<uint32_t>(&p, TypeId(all32 ? GgufValueType::kInt32 : GgufValueType::kInt64));
      Put<uint64_t>(&p, is->size());
      for (int64_t v : *is) {
        if (all32) {
          Put<int32_t>(&p, static_cast<int32_t>(v));
        } else {
          Put<int64_t>(&p, v);
        }
      }
    } else if (const auto* fs = std::get_if<std::vector<double>>(arr)) {
      Put<uint32_t>(&p, TypeId(GgufValueType::kFloat32));
      Put<uint64_t>(&p, fs->size());
      for (double v : *fs) Put<float>(&p, static_cast<float>(v));
    } else if (const auto* bs = std::get_if<std::vector<bool>>(arr)) {
      Put<uint32_t>(&p, TypeId(GgufValueType::kBool));
      Put<uint64_t>(&p, bs->size());
      for (bool v : *bs) p.push_back(v ? '\1' : '\0');
    }
    AddRawValue(key, TypeId(GgufValueType::kArray), p);
  }
}

absl::StatusOr<std::string> EncodeGgmlTensor(GgmlType type, const std::vector<float>& data) {
  const int64_t n = static_cast<int64_t>(data.size());
  std::string out;
  switch (type) {
    case GgmlType::kF32:
      out.resize(n * 4);
      if (n > 0) std::memcpy(out.data(), data.data(), n * 4);
      return out;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (float f : data) Put<uint16_t>(&out, type == GgmlType::kF16 ? Fp32ToFp16(f)
                                                                     : Fp32ToBf16(f));
      return out;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      break;
  }
  const GgmlTypeTraits t = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  if (t.name == nullptr || t.block_size != kGgmlBlockSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf writer: cannot encode type ", static_cast<uint32_t>(type)));
  }
  if (n % kGgmlBlockSize != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gguf writer: ", n, " values are not a ",
                                                   "multiple of the block size 32"));
  }
  const int64_t blocks = n / kGgmlBlockSize;
  out.resize(blocks * t.block_bytes);
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  if (type == GgmlType::kQ8_0) QuantizeQ8_0(data.data(), blocks, dst);
  if (type == GgmlType::kQ4_0) QuantizeQ4_0(data.data(), blocks, dst);
  if (type == GgmlType::kQ4_1) QuantizeQ4_1(data.data(), blocks, dst);
  return out;
}

absl::Status GgufWriter::AddTensor(const std::string& name, const std::vector<int64_t>& dims,
                                   GgmlType type, const std::vector<float>& data) {
  RETURN_IF_ERROR(AddTensorLazy(name, dims, type, nullptr));
  Tensor& t = tensors_.back();
  const GgufTensorInfo info{name, dims, t.type, 0};
  if (info.num_elements() != data.size()) {
    tensors_.pop_back();
    return absl::InvalidArgumentError(absl::StrCat("gguf writer: tensor '", name, "' has ",
                                                   data.size(), " values, dims imply ",
                                                   info.num_elements()));
  }
  auto encoded = EncodeGgmlTensor(type, data);
  if (!encoded.ok()) {
    tensors_.pop_back();
    return encoded.status();
  }
  t.bytes = std::move(encoded).value();
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorLazy(const std::string& name, const std::vector<int64_t>& dims,
                                       GgmlType type,
                                       std::function<std::vector<float>()> produce) {
  GgufTensorInfo info;
  info.name = name;
  info.dims = dims;
  info.type = static_cast<uint32_t>(type);
  ASSIGN_OR_RETURN(uint64_t bytes, GgmlTensorBytes(info));
  if (!IsDequantizable(info.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf writer: cannot encode type ", info.type, " for '", name, "'"));
  }
  tensors_.push_back({name, dims, info.type, bytes, "", std::move(produce)});
  return absl::OkStatus();
}

void GgufWriter::AddRawTensor(const std::string& name, const std::vector<int64_t>& dims,
                              uint32_t type, const std::string& bytes) {
  tensors_.push_back({name, dims, type, bytes.size(), bytes, nullptr});
}

std::string GgufWriter::Header() const {
  const uint64_t align = alignment_;
  std::string out;
  Put<uint32_t>(&out, kGgufMagic);
  Put<uint32_t>(&out, version_);
  Put<uint64_t>(&out, tensors_.size());
  const bool write_alignment = alignment_ != kGgufDefaultAlignment;
  Put<uint64_t>(&out, kv_count_ + (write_alignment ? 1 : 0));
  if (write_alignment) {
    PutString(&out, "general.alignment");
    Put<uint32_t>(&out, TypeId(GgufValueType::kUint32));
    Put<uint32_t>(&out, alignment_);
  }
  out.append(kv_bytes_);
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, t.type);
    Put<uint64_t>(&out, offset);
    offset += (t.size + align - 1) / align * align;
  }
  out.resize((out.size() + align - 1) / align * align, 0);
  return out;
}

absl::StatusOr<std::string> GgufWriter::TensorBytes(const Tensor& t) const {
  if (!t.produce) return t.bytes;
  const std::vector<float> data = t.produce();
  const GgufTensorInfo info{t.name, t.dims, t.type, 0};
  if (data.size() != info.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("gguf writer: producer of '", t.name,
                                                   "' returned ", data.size(), " values, want ",
                                                   info.num_elements()));
  }
  return EncodeGgmlTensor(static_cast<GgmlType>(t.type), data);
}

absl::StatusOr<std::string> GgufWriter::Serialize() const {
  std::string out = Header();
  for (const Tensor& t : tensors_) {
    ASSIGN_OR_RETURN(std::string bytes, TensorBytes(t));
    out.append(bytes);
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("gguf writer: cannot create ", path));
  const std::string header = Header();
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const Tensor& t : tensors_) {
    ASSIGN_OR_RETURN(std::string bytes, TensorBytes(t));
    bytes.resize((bytes.size() + alignment_ - 1) / alignment_ * alignment_, 0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat("gguf writer: failed writing ", path));
  return absl::OkStatus();
}

}  // namespace rtgen
