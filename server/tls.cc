#include "server/tls.h"

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"
#include "engine/common/read_text_file.h"
#include "engine/common/status_macros.h"

namespace rtgen {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(what, ": cannot read '", path, "'"));
  if (text->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", path, "' is not a PEM file"));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.cert_path.empty() != files.key_path.empty()) {
    return absl::InvalidArgumentError("tls-cert and tls-key must be given together");
  }
  if (files.cert_path.empty()) {
    if (!files.client_ca_path.empty()) {
      return absl::InvalidArgumentError("tls-client-ca needs tls-cert and tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(files.cert_path, "tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(files.key_path, "tls-key"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (files.client_ca_path.empty()) {
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  } else {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadPemFile(files.client_ca_path, "tls-client-ca"));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace rtgen
