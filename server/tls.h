#pragma once
// Server transport credentials from PEM files: plaintext when no certificate is given, TLS with
// --tls-cert/--tls-key, and mutual TLS (client certificates required and verified against the
// CA) when --tls-client-ca is given as well.

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace rtgen {

struct TlsFiles {
  std::string cert_path;       // PEM certificate chain; empty: plaintext
  std::string key_path;        // PEM private key of cert_path
  std::string client_ca_path;  // PEM CA bundle; non-empty: require and verify client certs
};

// INVALID_ARGUMENT when only one of cert/key is set, or a CA without them; NOT_FOUND when a file
// cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// The whole file, or NOT_FOUND naming `what` (the flag) and the path.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace rtgen
