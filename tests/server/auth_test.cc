// TokenAuthenticator: the token file format and the "authorization: Bearer <token>" check.

#include "server/auth.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace rtgen {
namespace {

std::string WriteTempFile(const std::string& text) {
  char path[] = "/tmp/rtgen-auth-test-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::ofstream(path) << text;
  return path;
}

TEST(TokenAuthenticatorTest, ReadsTokensSkippingCommentsAndBlankLines) {
  const std::string path = WriteTempFile("# tokens\n  alpha  \n\nbeta\n");
  absl::StatusOr<TokenAuthenticator> auth = TokenAuthenticator::FromFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(auth->num_tokens(), 2u);
  EXPECT_TRUE(auth->CheckHeader("Bearer alpha").ok());
  EXPECT_TRUE(auth->CheckHeader("bearer beta").ok());
}

TEST(TokenAuthenticatorTest, RejectsWrongMalformedAndMissingTokens) {
  absl::StatusOr<TokenAuthenticator> auth = TokenAuthenticator::FromTokens({"alpha"});
  ASSERT_TRUE(auth.ok());
  for (const char* header : {"Bearer alph", "Bearer alphaa", "alpha", "Basic alpha", "Bearer "}) {
    EXPECT_EQ(auth->CheckHeader(header).error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << header;
  }
  const std::multimap<grpc::string_ref, grpc::string_ref> none;
  EXPECT_EQ(auth->Check(none).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenAuthenticatorTest, RefusesEmptyAndUnreadableFiles) {
  const std::string path = WriteTempFile("# only a comment\n\n");
  absl::StatusOr<TokenAuthenticator> empty = TokenAuthenticator::FromFile(path);
  std::remove(path.c_str());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenAuthenticator::FromFile("/nonexistent/tokens").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(TokenAuthenticator::FromTokens({"has space"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rtgen
