#include "tests/server/test_server.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace rtgen::testing {

TestServer& SharedServer() {
  static TestServer* shared = [] {
    ServerConfig config;
    config.model_path = kModelPath;
    config.backend.kind = "cpu";
    config.backend.threads = 2;
    config.host = "127.0.0.1";
    config.port = 0;  // ephemeral
    config.metrics_host = "127.0.0.1";
    config.metrics_port = 0;
    config.engine.max_num_seqs = 16;
    config.engine.max_model_len = kMaxModelLen;
    config.engine.num_kv_blocks = 256;  // 16 blocks of 16 tokens per sequence at most
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config);
    if (!server.ok()) {
      std::fprintf(stderr, "cannot start the test server: %s\n",
                   server.status().ToString().c_str());
      std::abort();
    }
    auto* out = new TestServer();
    out->server = *std::move(server);
    out->target = absl::StrCat("127.0.0.1:", out->server->port());
    out->client = InferenceClient::Connect(out->target);
    // Stopped before static destructors run (atexit handlers registered after a static's
    // construction run before its destructor): a gRPC callback still finishing a stream logged
    // through spdlog's registry while exit destroyed it (ThreadSanitizer).
    std::atexit([] { SharedServer().server->Shutdown(absl::ZeroDuration()); });
    return out;
  }();
  return *shared;
}

}  // namespace rtgen::testing
