#pragma once
// The one place where an absl::Status becomes a grpc::Status (at the server edge).

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace rtgen {

// Same code (absl and gRPC share the canonical codes) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace rtgen
