// The non-streaming surface: GetModelInfo, Tokenize, GetLoad, gRPC health checking, server
// reflection and the Prometheus metrics.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/server/test_server.h"

namespace rtgen {
namespace {

using testing::SharedServer;

TEST(ServiceTest, ModelInfoDescribesSmolLM2OnCpu) {
  absl::StatusOr<v1::ModelInfo> info = SharedServer().client->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->architecture(), "llama");
  EXPECT_EQ(info->vocab_size(), 49152);
  EXPECT_EQ(info->num_layers(), 30);
  EXPECT_EQ(info->hidden_size(), 576);
  EXPECT_EQ(info->context_length(), testing::kMaxModelLen);
  EXPECT_EQ(info->backend(), "cpu");
  EXPECT_TRUE(info->has_chat_template());
  EXPECT_FALSE(info->name().empty());
}

TEST(ServiceTest, TokenizeChatRendersTheTemplate) {
  v1::TokenizeRequest request;
  v1::ChatMessage* m = request.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("Hello");
  absl::StatusOr<v1::TokenizeResponse> response = SharedServer().client->Tokenize(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_NE(response->rendered_prompt().find("<|im_start|>user\nHello<|im_end|>"),
            std::string::npos)
      << response->rendered_prompt();
  ASSERT_EQ(response->pieces_size(), response->token_ids_size());
  std::string joined;
  for (const std::string& piece : response->pieces()) joined += piece;
  EXPECT_NE(joined.find("<|im_start|>"), std::string::npos);  // one special token, not text
  int im_start_tokens = 0;
  for (const std::string& piece : response->pieces()) im_start_tokens += piece == "<|im_start|>";
  EXPECT_EQ(im_start_tokens, 3);  // system (default) + user + assistant prompt
  // The generation prompt: the model is asked for the assistant's turn.
  const std::string& rendered = response->rendered_prompt();
  const std::string assistant = "<|im_start|>assistant\n";
  EXPECT_TRUE(rendered.size() >= assistant.size() &&
              rendered.compare(rendered.size() - assistant.size(), assistant.size(), assistant) ==
                  0)
      << rendered;
}

TEST(ServiceTest, TokenizePromptWithoutSpecialTokens) {
  v1::TokenizeRequest request;
  request.set_prompt("Hello world");
  request.set_add_special_tokens(false);
  absl::StatusOr<v1::TokenizeResponse> response = SharedServer().client->Tokenize(request);
  ASSERT_TRUE(response.ok()) << response.status();
  std::string joined;
  for (const std::string& piece : response->pieces()) joined += piece;
  EXPECT_EQ(joined, "Hello world");
  EXPECT_EQ(response->token_ids_size(), 2);
}

TEST(ServiceTest, SpecialTokenTextIsTheSpecialTokenWithOrWithoutSpecialTokens) {
  // As the proto says (and Hugging Face tokenizers and vLLM do): add_special_tokens decides BOS
  // only; "<|im_start|>" in a prompt is the special token either way.
  for (bool add : {false, true}) {
    v1::TokenizeRequest request;
    request.set_prompt("<|im_start|>hi");
    request.set_add_special_tokens(add);
    absl::StatusOr<v1::TokenizeResponse> response = SharedServer().client->Tokenize(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_GE(response->pieces_size(), 2);
    EXPECT_EQ(response->pieces(0), "<|im_start|>") << "add_special_tokens " << add;
  }
}

TEST(ServiceTest, HealthIsServing) {
  auto& client = *SharedServer().client;
  absl::StatusOr<HealthStatus> overall = client.Health();
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, HealthStatus::kServing);
  absl::StatusOr<HealthStatus> service = client.Health("rtgen.v1.Inference");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ(*service, HealthStatus::kServing);
  absl::StatusOr<HealthStatus> unknown = client.Health("no.such.Service");
  EXPECT_FALSE(unknown.ok());  // NOT_FOUND for a service that was never registered
}

// Waits for one completion-queue event and returns whether it succeeded.
bool Await(grpc::CompletionQueue& cq, void* expected_tag) {
  void* tag = nullptr;
  bool ok = false;
  return cq.Next(&tag, &ok) && tag == expected_tag && ok;
}

TEST(ServiceTest, ReflectionListsTheInferenceService) {
  // ServerReflectionRequest{list_services: ""} encoded by hand: field 7, length 0.
  const std::string request_bytes("\x3A\x00", 2);
  grpc::GenericStub stub(grpc::CreateChannel(SharedServer().target,
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  int tags[5];
  call->StartCall(&tags[0]);
  ASSERT_TRUE(Await(cq, &tags[0]));
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, &tags[1]);
  ASSERT_TRUE(Await(cq, &tags[1]));
  call->WritesDone(&tags[2]);
  ASSERT_TRUE(Await(cq, &tags[2]));
  grpc::ByteBuffer response;
  call->Read(&response, &tags[3]);
  ASSERT_TRUE(Await(cq, &tags[3]));
  grpc::Status status;
  call->Finish(&status, &tags[4]);
  ASSERT_TRUE(Await(cq, &tags[4]));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_NE(bytes.find("rtgen.v1.Inference"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
}

// GET /metrics over a plain socket; returns the whole HTTP response.
std::string HttpGetMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request =
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) out.append(buffer, n);
    }
  }
  close(fd);
  return out;
}

TEST(ServiceTest, MetricsEndpointServesTheDocumentedNames) {
  auto& shared = SharedServer();
  v1::GenerateRequest request;
  request.set_prompt("Metrics, please:");
  request.mutable_stopping()->set_max_tokens(3);
  request.mutable_stopping()->set_ignore_eos(true);
  ASSERT_TRUE(shared.client->Generate(request).ok());
  v1::GenerateRequest bad;  // a rejected request
  ASSERT_FALSE(shared.client->Generate(bad).ok());

  ASSERT_GT(shared.server->metrics_port(), 0);
  const std::string scrape = HttpGetMetrics(shared.server->metrics_port());
  ASSERT_NE(scrape.find("200 OK"), std::string::npos) << scrape.substr(0, 200);
  for (const char* name :
       {"rtgen_time_to_first_token_seconds_bucket", "rtgen_time_per_output_token_seconds_bucket",
        "rtgen_e2e_request_latency_seconds_bucket", "rtgen_queue_time_seconds_bucket",
        "rtgen_requests_waiting", "rtgen_requests_running", "rtgen_kv_cache_usage_ratio",
        // rtgen_graph_replays_total{bucket} appears with the first CUDA graph replay.
        "rtgen_batch_size_bucket", "rtgen_eager_steps_total",
        "rtgen_prompt_tokens_total", "rtgen_generation_tokens_total",
        "rtgen_prefix_cache_hit_tokens_total", "rtgen_requests_total",
        "rtgen_preemptions_total"}) {
    EXPECT_NE(scrape.find(name), std::string::npos) << name;
  }
  // Buckets start below a millisecond.
  EXPECT_NE(scrape.find("rtgen_time_per_output_token_seconds_bucket{le=\"0.0001\"}"),
            std::string::npos);
  const std::string rendered = shared.server->metrics().Render();
  EXPECT_NE(rendered.find("rtgen_requests_total{finish_reason=\"length\"}"), std::string::npos);
  EXPECT_EQ(rendered.find("rtgen_requests_total{finish_reason=\"length\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(rendered.find("rtgen_requests_total{finish_reason=\"rejected\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(rendered.find("rtgen_generation_tokens_total 0\n"), std::string::npos);
}

}  // namespace
}  // namespace rtgen
