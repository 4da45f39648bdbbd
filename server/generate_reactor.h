#pragma once
// One server-streaming Generate call. The engine thread pushes chunks through the StreamSink into
// a mutex-protected queue; the reactor keeps at most one write in flight and OnWriteDone starts
// the next. OnCancel tells the engine, OnDone deletes the reactor.

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "rtgen/v1/inference.grpc.pb.h"
#include "server/metrics.h"

namespace rtgen {

// Writes serialized v1::GenerateResponse messages (Generate is a raw method: see
// server/raw_message.h).
class GenerateReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Chunks a slow client has not taken yet are merged into one message up to this size (bytes,
  // the sum of the chunks' encoded sizes); a chunk that would pass it starts a new message.
  static constexpr size_t kMaxCoalescedBytes = 64 * 1024;

  // `engine_id` is unique among live requests; `client_id` is echoed in every response.
  GenerateReactor(Engine* engine, Metrics* metrics, std::string engine_id, std::string client_id);

  // Submits `request` with a sink feeding this reactor; finishes the call if the engine refuses.
  void Start(Request request);
  // Ends the call before anything was submitted (a request that failed validation).
  void Reject(const absl::Status& status);

  // Runs in OnDone, just before the reactor deletes itself (the service counts open streams).
  void set_on_done(std::function<void()> on_done) { on_done_ = std::move(on_done); }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Shared with the engine's sink, which may outlive the reactor: after OnDone, `reactor` is
  // null and chunks are dropped. `mu` guards `reactor` and every reactor field below.
  struct Outbox {
    absl::Mutex mu;
    GenerateReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  void Push(StreamChunk chunk);         // engine thread, under outbox_->mu
  void MaybeStartWrite();               // under outbox_->mu
  void FinishOnce(grpc::Status status);  // under outbox_->mu

  Engine* const engine_;
  Metrics* const metrics_;  // may be null
  const std::string engine_id_;
  const std::string client_id_;
  const std::shared_ptr<Outbox> outbox_;
  std::function<void()> on_done_;  // set before Start/Reject

  // Guarded by outbox_->mu (not annotated: the lock lives in another object).
  std::deque<v1::GenerateResponse> pending_;  // not yet written; only the back may be final
  size_t pending_back_bytes_ = 0;             // encoded size of pending_.back() (estimate)
  v1::GenerateResponse in_flight_;            // the message of the write in flight
  grpc::ByteBuffer in_flight_bytes_;          // in_flight_ serialized, alive until OnWriteDone
  bool write_in_flight_ = false;
  bool in_flight_is_final_ = false;
  bool final_received_ = false;               // the engine sent its last chunk
  grpc::Status final_status_;                 // for Finish after the last write
  bool cancelled_ = false;                    // OnCancel ran
  bool finished_ = false;                     // Finish was called
};

}  // namespace rtgen
