#pragma once
// A small random-weight Llama (hidden 64, 2 layers) that keeps SmolLM2's tokenizer and chat
// template, written once per test binary into a temp dir, and in-process servers on it (CPU
// backend, ephemeral port). Fast enough that a thousand streams fit in CI time.

#include <cstdint>
#include <memory>
#include <string>

#include "client/inference_client.h"
#include "server/server.h"
#include "tests/wait_for_idle.h"

namespace rtgen::reliability {

// Writes the model on first use (aborting the binary if it cannot) and returns its path.
const std::string& SyntheticModelPath();

// A server config for the synthetic model: CPU, 2 threads, 127.0.0.1:0, no /metrics port.
ServerConfig SmallServerConfig();

struct RunningServer {
  std::unique_ptr<Server> server;
  std::unique_ptr<InferenceClient> client;
  std::string target;  // "127.0.0.1:PORT"
};

// Starts a server with `config` (aborting the binary if it cannot).
RunningServer StartServer(const ServerConfig& config);

// The value of rtgen_requests_total{finish_reason="<reason>"} in the server's text exposition
// (-1: no such line).
double FinishedCount(Server& server, const std::string& reason);

// rtgen-client beside this test binary (both land in <build>/bin); $RTGEN_CLIENT overrides.
std::string ClientBinary();

// Resident set size of this process, bytes (/proc/self/statm), after malloc_trim.
int64_t ResidentBytes();

// tests/wait_for_idle.h, shared with the server tests.
using testing::WaitForIdle;

}  // namespace rtgen::reliability
