#pragma once
// Drives load against a server: a warm-up, then the measured phase in closed loop (a fixed
// number of requests in flight) or open loop (Poisson arrivals at a request rate).

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/prompt_source.h"
#include "client/bench/request_record.h"
#include "client/inference_client.h"

namespace rtgen::bench {

struct LoadConfig {
  // Closed loop: requests in flight. Open loop (request_rate set): the most in flight, 0 = no cap.
  int concurrency = 1;
  std::optional<double> request_rate;  // requests per second; +inf sends everything at once
  int num_requests = 0;                // measured requests; 0: until duration_s
  double duration_s = 0;               // measured seconds; 0: until num_requests
  int warmup = 0;                      // requests sent (closed loop) and dropped before measuring
  uint64_t seed = 0;                   // Poisson schedule
  double request_timeout_s = 600;      // gRPC deadline of each request
  bool progress = true;                // the bar on stderr
};

struct LoadResult {
  std::vector<RequestRecord> records;  // measured requests only, in completion order
  double duration_s = 0;               // first send -> last completion of the measured phase
};

// Sends one request built from `prompt` (greedy, ignore_eos, max_tokens: the output length is
// exact) and times it from the send.
RequestRecord RunOneRequest(InferenceClient& client, const BenchPrompt& prompt,
                            double request_timeout_s);

// Checks `config` (a stop condition set, counts non-negative, rate positive) and runs it.
absl::StatusOr<LoadResult> RunLoad(const LoadConfig& config, InferenceClient& client,
                                   PromptSource& prompts);

}  // namespace rtgen::bench
