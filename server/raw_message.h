#pragma once
// Request and response messages of the raw (ByteBuffer) service methods.
//
// Why raw: proto3 `string` fields must hold UTF-8, and protobuf's generated parser refuses a
// message whose string field does not. gRPC 1.51's callback server then ends the call with a bare
// UNIMPLEMENTED before any handler runs, so the client never learns which field was wrong.
// Generate and Tokenize therefore receive their request as bytes and parse it here, reading
// every `string` field as `bytes` (the wire format is the same): the text arrives exactly as
// sent, and request validation answers INVALID_ARGUMENT naming the field that is not UTF-8.

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace rtgen {

// Parses `wire` into `out` (cleared first) without checking string fields for UTF-8.
// INVALID_ARGUMENT when the bytes are not a well-formed message of out's type.
absl::Status ParseAllowingInvalidUtf8(const grpc::ByteBuffer& wire,
                                      google::protobuf::Message& out);

// `message` serialized as one slice.
grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::Message& message);

}  // namespace rtgen
