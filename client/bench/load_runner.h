#pragma once
// Drives load against a server: a warm-up, then the measured phase in closed loop (a fixed
// number of requests in flight) or open loop (Poisson arrivals at a request rate).

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/progress_bar.h"
#include "client/bench/prompt_source.h"
#include "client/bench/request_record.h"
#include "client/inference_client.h"

namespace rtgen::bench {

struct LoadConfig {
  // Closed loop: requests in flight (unset: 1). Open loop (request_rate set): the most in
  // flight, 0 = no cap (unset: no cap; a default of 1 made every open-loop run a closed loop of
  // one request).
  std::optional<int> concurrency;
  // Requests per second; +inf sends everything at once (then num_requests is needed).
  std::optional<double> request_rate;
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

// A stop condition set, counts non-negative, a positive rate (+inf only with num_requests: with
// a duration alone it would start requests without end).
absl::Status CheckLoadConfig(const LoadConfig& config);

// Requests in flight: closed loop, exactly this many; open loop, at most this many (0: no cap
// but kMaxOpenLoopInFlight).
int InFlightLimit(const LoadConfig& config);

// The open loop's cap when none is given: each request in flight is a thread, and tens of
// thousands at once (--request-rate inf --num-requests 40000) could not all be started.
inline constexpr int kMaxOpenLoopInFlight = 4096;

// The measured open-loop phase with `send` doing each request (RunLoad passes RunOneRequest):
// the first request at once, the next after exponential gaps of mean 1 / rate; no request
// starts past `duration_s` of wall-clock time (when > 0), however far the schedule or the cap
// has fallen behind; at most `max_in_flight` at once when > 0, else `uncapped_limit` (a test
// sets a small one). `send` runs on its own thread per request.
LoadResult RunOpenLoop(double rate, int max_in_flight, int limit, double duration_s,
                       uint64_t seed, PromptSource& prompts,
                       const std::function<RequestRecord(const BenchPrompt&)>& send,
                       ProgressBar& bar, int uncapped_limit = kMaxOpenLoopInFlight);

// Checks `config` (CheckLoadConfig) and runs it.
absl::StatusOr<LoadResult> RunLoad(const LoadConfig& config, InferenceClient& client,
                                   PromptSource& prompts);

}  // namespace rtgen::bench
