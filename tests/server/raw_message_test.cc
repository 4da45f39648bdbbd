// server/raw_message.h: requests parse with every field intact, invalid UTF-8 arrives unchanged
// (so validation can name the field), and malformed bytes are INVALID_ARGUMENT.

#include "server/raw_message.h"

#include <string>

#include <gtest/gtest.h>

#include "rtgen/v1/inference.pb.h"

namespace rtgen {
namespace {

grpc::ByteBuffer Wire(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

v1::GenerateRequest FullRequest() {
  v1::GenerateRequest r;
  r.set_request_id("id-1");
  auto* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("héllo");
  r.mutable_sampling()->set_temperature(0.5f);
  r.mutable_sampling()->set_top_k(0);  // proto3 optional: set to the default, still present
  r.mutable_sampling()->set_seed(1234567890123ULL);
  r.mutable_stopping()->set_max_tokens(7);
  r.mutable_stopping()->add_stop("END");
  r.mutable_stopping()->add_stop_token_ids(3);
  r.mutable_stopping()->add_stop_token_ids(5);
  r.set_add_special_tokens(false);
  r.set_logprobs(2);
  r.set_priority(-3);
  r.set_latency_budget_ms(40);
  return r;
}

TEST(RawMessageTest, ValidRequestRoundTripsEveryField) {
  const v1::GenerateRequest sent = FullRequest();
  v1::GenerateRequest got;
  got.set_prompt("stale");  // parsing clears what was there
  ASSERT_TRUE(ParseAllowingInvalidUtf8(Wire(sent.SerializeAsString()), got).ok());
  EXPECT_EQ(got.SerializeAsString(), sent.SerializeAsString());
  EXPECT_TRUE(got.sampling().has_top_k());
  EXPECT_FALSE(got.sampling().has_top_p());
  EXPECT_EQ(got.priority(), -3);
}

TEST(RawMessageTest, InvalidUtf8ArrivesUnchanged) {
  v1::GenerateRequest sent = FullRequest();
  const std::string bad_content("caf\xC3(", 5);
  const std::string bad_stop("\xFF\xFE", 2);
  sent.mutable_messages()->mutable_messages(0)->set_content(bad_content);
  sent.mutable_stopping()->set_stop(0, bad_stop);
  const std::string bytes = sent.SerializePartialAsString();
  v1::GenerateRequest strict;
  EXPECT_FALSE(strict.ParseFromString(bytes)) << "protobuf's own parser should refuse this";
  v1::GenerateRequest got;
  ASSERT_TRUE(ParseAllowingInvalidUtf8(Wire(bytes), got).ok());
  EXPECT_EQ(got.messages().messages(0).content(), bad_content);
  EXPECT_EQ(got.stopping().stop(0), bad_stop);
  EXPECT_EQ(got.stopping().max_tokens(), 7);
}

TEST(RawMessageTest, UnknownFieldsAreKept) {
  // Field 99, varint 1: a newer client's field.
  const std::string bytes = FullRequest().SerializeAsString() + std::string("\x98\x06\x01", 3);
  v1::GenerateRequest got;
  ASSERT_TRUE(ParseAllowingInvalidUtf8(Wire(bytes), got).ok());
  EXPECT_EQ(got.GetReflection()->GetUnknownFields(got).field_count(), 1);
}

TEST(RawMessageTest, MalformedBytesAreInvalidArgument) {
  v1::TokenizeRequest got;
  // Field 1 (prompt) claims 100 bytes but 3 follow.
  const absl::Status s = ParseAllowingInvalidUtf8(Wire(std::string("\x0a\x64" "abc", 5)), got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rtgen.v1.TokenizeRequest"), std::string::npos) << s;
}

TEST(RawMessageTest, EmptyBytesAreTheEmptyMessage) {
  v1::TokenizeRequest got;
  ASSERT_TRUE(ParseAllowingInvalidUtf8(Wire(""), got).ok());
  EXPECT_EQ(got.input_case(), v1::TokenizeRequest::INPUT_NOT_SET);
}

TEST(RawMessageTest, SerializeToByteBufferHoldsTheMessage) {
  v1::TokenizeResponse response;
  response.add_token_ids(42);
  response.add_pieces("piece");
  v1::TokenizeResponse back;
  ASSERT_TRUE(ParseAllowingInvalidUtf8(SerializeToByteBuffer(response), back).ok());
  EXPECT_EQ(back.SerializeAsString(), response.SerializeAsString());
}

}  // namespace
}  // namespace rtgen
