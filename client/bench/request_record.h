#pragma once
// What one benchmark request measured, as the load runner records it.

#include <vector>

#include "absl/status/status.h"

namespace rtgen::bench {

struct RequestRecord {
  absl::StatusCode code = absl::StatusCode::kOk;  // the stream's final gRPC status
  bool finish_error = false;        // OK stream whose last message had FINISH_REASON_ERROR
  int prompt_tokens = 0;            // as sent (token ids) or as the server's usage reports
  int output_tokens = 0;            // token ids received
  double ttft_s = 0;                // send -> first message carrying a token, seconds
  double e2e_s = 0;                 // send -> end of stream, seconds
  std::vector<double> itl_s;        // one gap per token after the first, seconds

  bool ok() const { return code == absl::StatusCode::kOk && !finish_error; }
  // (e2e - ttft) / (tokens - 1), seconds; 0 when fewer than two tokens came back.
  double TpotSeconds() const {
    return output_tokens > 1 ? (e2e_s - ttft_s) / (output_tokens - 1) : 0;
  }
};

}  // namespace rtgen::bench
