#pragma once
// Bearer-token authentication for rtgen.v1.Inference. Tokens come from a file (one per line;
// blank lines and lines starting with '#' are ignored); a call must carry the metadata
// `authorization: Bearer <token>` with one of them.
//
// Where it is enforced: at the top of every InferenceService handler, before any work, so the
// same check holds on TLS and insecure ports alike. grpc.health.v1.Health and reflection are
// other services and stay open (probes carry no token). gRPC C++ server interceptors cannot end
// a call with a status of their choosing, and an AuthMetadataProcessor only runs on secure
// ports, so neither can cover both modes.

#include <map>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rtgen {

class TokenAuthenticator {
 public:
  // Reads the tokens in `path`; INVALID_ARGUMENT when it holds none, NOT_FOUND when unreadable.
  static absl::StatusOr<TokenAuthenticator> FromFile(const std::string& path);
  // INVALID_ARGUMENT for an empty list or a token with whitespace.
  static absl::StatusOr<TokenAuthenticator> FromTokens(std::vector<std::string> tokens);

  // OK when `metadata` holds `authorization: Bearer <one of the tokens>`; UNAUTHENTICATED
  // otherwise (the message says whether the header was missing or the token wrong, never which
  // tokens exist).
  grpc::Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // The same check on a bare header value ("Bearer abc").
  grpc::Status CheckHeader(absl::string_view header) const;

  size_t num_tokens() const { return tokens_.size(); }

 private:
  explicit TokenAuthenticator(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  std::vector<std::string> tokens_;
};

}  // namespace rtgen
