// InferenceClient::Generate against a stand-in server whose stream ends OK with or without the
// protocol's final message (the one with a finish reason): without it, the result is an error.

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "rtgen/v1/inference.grpc.pb.h"

namespace rtgen {
namespace {

// Streams two text messages, then a final one with a finish reason only when `send_final`.
class StandInService final : public v1::Inference::Service {
 public:
  explicit StandInService(bool send_final) : send_final_(send_final) {}

  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest*,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    v1::GenerateResponse response;
    for (const char* text : {"Hel", "lo"}) {
      response.set_text(text);
      writer->Write(response);
    }
    if (send_final_) {
      v1::GenerateResponse last;
      last.set_finish_reason(v1::FINISH_REASON_LENGTH);
      last.mutable_usage()->set_generated_tokens(2);
      writer->Write(last);
    }
    return grpc::Status::OK;
  }

 private:
  const bool send_final_;
};

absl::StatusOr<GenerateResult> GenerateAgainst(bool send_final) {
  StandInService service(send_final);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  EXPECT_GT(port, 0);
  std::unique_ptr<InferenceClient> client =
      InferenceClient::Connect(absl::StrCat("127.0.0.1:", port));
  absl::StatusOr<GenerateResult> result = client->Generate(v1::GenerateRequest());
  server->Shutdown();
  return result;
}

TEST(ClientStreamEndTest, FinalMessageGivesTheResult) {
  absl::StatusOr<GenerateResult> result = GenerateAgainst(/*send_final=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->text, "Hello");
  EXPECT_EQ(result->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(result->usage.generated_tokens(), 2);
}

TEST(ClientStreamEndTest, StreamEndingWithoutFinishReasonIsDataLoss) {
  absl::StatusOr<GenerateResult> result = GenerateAgainst(/*send_final=*/false);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find("without a finish_reason"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace rtgen
