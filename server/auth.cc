#include "server/auth.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/common/read_text_file.h"

namespace rtgen {
namespace {

constexpr char kAuthorization[] = "authorization";
constexpr absl::string_view kBearer = "bearer ";

// Compares in time independent of where the first difference is (lengths are not secret).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<TokenAuthenticator> TokenAuthenticator::FromFile(const std::string& path) {
  const absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("auth-token-file: cannot read '", path, "'"));
  }
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    tokens.emplace_back(line);
  }
  absl::StatusOr<TokenAuthenticator> auth = FromTokens(std::move(tokens));
  if (!auth.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth-token-file '", path, "': ", auth.status().message()));
  }
  return auth;
}

absl::StatusOr<TokenAuthenticator> TokenAuthenticator::FromTokens(
    std::vector<std::string> tokens) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens (one per line expected)");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i + 1, " is empty"));
    }
    for (char c : tokens[i]) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
          !absl::ascii_isprint(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(
            absl::StrCat("token ", i + 1, " contains whitespace or a control character"));
      }
    }
  }
  return TokenAuthenticator(std::move(tokens));
}

grpc::Status TokenAuthenticator::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  auto it = metadata.find(kAuthorization);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing 'authorization: Bearer <token>' metadata");
  }
  return CheckHeader(absl::string_view(it->second.data(), it->second.size()));
}

grpc::Status TokenAuthenticator::CheckHeader(absl::string_view header) const {
  if (header.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(header.substr(0, kBearer.size()), kBearer)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "authorization metadata must be 'Bearer <token>'");
  }
  const absl::string_view presented = absl::StripAsciiWhitespace(header.substr(kBearer.size()));
  bool match = false;
  for (const std::string& token : tokens_) match |= ConstantTimeEquals(presented, token);
  if (!match) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid bearer token");
  return grpc::Status::OK;
}

}  // namespace rtgen
