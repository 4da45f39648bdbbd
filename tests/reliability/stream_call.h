#pragma once
// One Generate stream on the gRPC callback client API, so a test can hold a thousand streams
// open from a few threads. Optionally cancels itself (TryCancel) after a number of messages.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rtgen/v1/inference.grpc.pb.h"

namespace rtgen::reliability {

class StreamCall : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  // `cancel_after_messages` < 0: never cancel; 0: cancel right after starting.
  StreamCall(v1::Inference::Stub* stub, v1::GenerateRequest request,
             int cancel_after_messages = -1,
             absl::Duration timeout = absl::InfiniteDuration());

  void Start();
  // Cancels the call from any thread (the client side of a disconnect).
  void Cancel() { context_.TryCancel(); }
  // Blocks until OnDone; false when `timeout` passes first.
  bool Wait(absl::Duration timeout);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Valid after Wait returned true.
  const grpc::Status& status() const { return status_; }
  int messages() const { return messages_; }
  int tokens() const { return tokens_; }
  v1::FinishReason finish_reason() const { return finish_reason_; }

 private:
  v1::Inference::Stub* const stub_;
  const v1::GenerateRequest request_;
  const int cancel_after_messages_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  int messages_ = 0;  // touched only by the reactor's callbacks, which never overlap
  int tokens_ = 0;
  v1::FinishReason finish_reason_ = v1::FINISH_REASON_UNSPECIFIED;

  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_;  // written before done_ becomes true
};

// `count` channels that do not share a connection (each its own subchannel pool), so that many
// streams spread over several HTTP/2 connections.
std::vector<std::shared_ptr<grpc::Channel>> DistinctChannels(const std::string& target,
                                                             int count);

}  // namespace rtgen::reliability
