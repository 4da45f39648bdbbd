#include "server/raw_message.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"

namespace rtgen {
namespace {

namespace pb = google::protobuf;

// Every `string` field of `message` (and its nested types) becomes `bytes`. Map entries keep
// string keys: protobuf does not allow bytes keys.
void StringFieldsToBytes(pb::DescriptorProto& message) {
  if (message.options().map_entry()) return;
  for (pb::FieldDescriptorProto& field : *message.mutable_field()) {
    if (field.type() == pb::FieldDescriptorProto::TYPE_STRING) {
      field.set_type(pb::FieldDescriptorProto::TYPE_BYTES);
    }
  }
  for (pb::DescriptorProto& nested : *message.mutable_nested_type()) StringFieldsToBytes(nested);
}

// A second descriptor pool holding a copy of each .proto file in which string fields are bytes,
// and dynamic messages of those copies. Messages keep their full names, so a type is found in
// the copy by the name of the generated type.
class BytesMirror {
 public:
  static BytesMirror& Get() {
    static BytesMirror* mirror = new BytesMirror();  // never destroyed: used until exit
    return *mirror;
  }

  // The mirror's prototype for `real`, or null if its file could not be copied.
  const pb::Message* Prototype(const pb::Descriptor* real) {
    absl::MutexLock lock(&mu_);
    auto it = prototypes_.find(real);
    if (it != prototypes_.end()) return it->second;
    const pb::Message* prototype = nullptr;
    if (AddFile(real->file())) {
      const pb::Descriptor* copy = pool_.FindMessageTypeByName(real->full_name());
      if (copy != nullptr) prototype = factory_.GetPrototype(copy);
    }
    prototypes_.emplace(real, prototype);
    return prototype;
  }

 private:
  BytesMirror() : factory_(&pool_) {}

  bool AddFile(const pb::FileDescriptor* file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pool_.FindFileByName(file->name()) != nullptr) return true;
    for (int i = 0; i < file->dependency_count(); ++i) {
      if (!AddFile(file->dependency(i))) return false;
    }
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    for (pb::DescriptorProto& message : *proto.mutable_message_type()) {
      StringFieldsToBytes(message);
    }
    return pool_.BuildFile(proto) != nullptr;
  }

  absl::Mutex mu_;
  pb::DescriptorPool pool_ ABSL_GUARDED_BY(mu_);
  pb::DynamicMessageFactory factory_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const pb::Descriptor*, const pb::Message*> prototypes_ ABSL_GUARDED_BY(mu_);
};

void CopyMessage(const pb::Message& from, pb::Message& to);

// Appends element `i` of repeated field `f` of `from` to field `t` of `to`.
void CopyRepeatedElement(const pb::Message& from, const pb::FieldDescriptor* f, int i,
                         pb::Message& to, const pb::FieldDescriptor* t) {
  const pb::Reflection& in = *from.GetReflection();
  const pb::Reflection& out = *to.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return out.AddInt32(&to, t, in.GetRepeatedInt32(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return out.AddInt64(&to, t, in.GetRepeatedInt64(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return out.AddUInt32(&to, t, in.GetRepeatedUInt32(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return out.AddUInt64(&to, t, in.GetRepeatedUInt64(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return out.AddDouble(&to, t, in.GetRepeatedDouble(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return out.AddFloat(&to, t, in.GetRepeatedFloat(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return out.AddBool(&to, t, in.GetRepeatedBool(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return out.AddEnumValue(&to, t, in.GetRepeatedEnumValue(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return out.AddString(&to, t, in.GetRepeatedString(from, f, i));
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return CopyMessage(in.GetRepeatedMessage(from, f, i), *out.AddMessage(&to, t));
  }
}

// Sets singular field `t` of `to` from field `f` of `from`.
void CopySingular(const pb::Message& from, const pb::FieldDescriptor* f, pb::Message& to,
                  const pb::FieldDescriptor* t) {
  const pb::Reflection& in = *from.GetReflection();
  const pb::Reflection& out = *to.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return out.SetInt32(&to, t, in.GetInt32(from, f));
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return out.SetInt64(&to, t, in.GetInt64(from, f));
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return out.SetUInt32(&to, t, in.GetUInt32(from, f));
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return out.SetUInt64(&to, t, in.GetUInt64(from, f));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return out.SetDouble(&to, t, in.GetDouble(from, f));
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return out.SetFloat(&to, t, in.GetFloat(from, f));
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return out.SetBool(&to, t, in.GetBool(from, f));
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return out.SetEnumValue(&to, t, in.GetEnumValue(from, f));
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return out.SetString(&to, t, in.GetString(from, f));
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return CopyMessage(in.GetMessage(from, f), *out.MutableMessage(&to, t));
  }
}

// Copies every set field of `from` (a mirror message) into `to` (the generated type with the
// same field numbers), and its unknown fields.
void CopyMessage(const pb::Message& from, pb::Message& to) {
  const pb::Reflection& in = *from.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  in.ListFields(from, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const pb::FieldDescriptor* t = to.GetDescriptor()->FindFieldByNumber(f->number());
    if (t == nullptr) continue;  // cannot happen: the mirror is a copy of to's descriptor
    if (f->is_repeated()) {
      const int n = in.FieldSize(from, f);
      for (int i = 0; i < n; ++i) CopyRepeatedElement(from, f, i, to, t);
    } else {
      CopySingular(from, f, to, t);
    }
  }
  to.GetReflection()->MutableUnknownFields(&to)->MergeFrom(in.GetUnknownFields(from));
}

absl::StatusOr<std::string> Flatten(const grpc::ByteBuffer& wire) {
  std::vector<grpc::Slice> slices;
  if (!wire.Dump(&slices).ok()) return absl::InvalidArgumentError("request: unreadable bytes");
  std::string bytes;
  bytes.reserve(wire.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

}  // namespace

absl::Status ParseAllowingInvalidUtf8(const grpc::ByteBuffer& wire, pb::Message& out) {
  out.Clear();
  absl::StatusOr<std::string> bytes = Flatten(wire);
  if (!bytes.ok()) return bytes.status();
  const std::string& type = out.GetDescriptor()->full_name();
  const pb::Message* prototype = BytesMirror::Get().Prototype(out.GetDescriptor());
  if (prototype == nullptr) {
    return absl::InternalError(absl::StrCat("no byte-string copy of ", type));
  }
  std::unique_ptr<pb::Message> mirror(prototype->New());
  if (!mirror->ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: not a well-formed ", type, " message"));
  }
  CopyMessage(*mirror, out);
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeToByteBuffer(const pb::Message& message) {
  // Straight into the slice gRPC sends (no intermediate string): one copy per streamed message.
  const size_t size = message.ByteSizeLong();
  grpc::Slice slice(size);
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace rtgen
