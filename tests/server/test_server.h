#pragma once
// One in-process rtgen server per test binary: the real SmolLM2-135M model on the CPU backend,
// gRPC on an ephemeral port of 127.0.0.1, and a client connected to it.

#include <memory>
#include <string>

#include "client/inference_client.h"
#include "server/server.h"

namespace rtgen::testing {

constexpr char kModelPath[] = RTGEN_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr int kMaxModelLen = 512;  // small, so a too-long prompt is cheap to build

struct TestServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<InferenceClient> client;
  std::string target;  // "127.0.0.1:PORT"
};

// Starts the server on first use (aborting the test binary if it cannot) and keeps it for the
// rest of the run.
TestServer& SharedServer();

}  // namespace rtgen::testing
