#include "server/generate_reactor.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "server/log_throttle.h"
#include "server/raw_message.h"
#include "server/response_conversion.h"
#include "server/status_conversion.h"

namespace rtgen {
namespace {

// The gRPC status that ends a stream whose last message carries `chunk.finish`.
grpc::Status FinalStatus(const StreamChunk& chunk) {
  switch (chunk.finish) {
    case FinishReason::kCancelled:
      return grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled");
    case FinishReason::kDeadline:
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "request deadline exceeded");
    case FinishReason::kError:
      return chunk.error.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, "generation failed")
                              : ToGrpcStatus(chunk.error);
    default:
      return grpc::Status::OK;
  }
}

// Appends `next` to `back` (both unwritten): token ids, text and logprobs concatenate; the
// finish fields and usage come from `next` when it is the last message. The text is moved out
// and appended to, so a slow reader's backlog costs the new text a merge, not all of it.
void MergeInto(v1::GenerateResponse& back, const v1::GenerateResponse& next) {
  std::string text = std::move(*back.mutable_text());
  text += next.text();
  back.MergeFrom(next);
  back.set_text(std::move(text));
}

}  // namespace

GenerateReactor::GenerateReactor(Engine* engine, Metrics* metrics, std::string engine_id,
                                 std::string client_id)
    : engine_(engine),
      metrics_(metrics),
      engine_id_(std::move(engine_id)),
      client_id_(std::move(client_id)),
      outbox_(std::make_shared<Outbox>()) {
  absl::MutexLock lock(&outbox_->mu);
  outbox_->reactor = this;
}

void GenerateReactor::Start(Request request) {
  request.id = engine_id_;
  std::shared_ptr<Outbox> outbox = outbox_;
  StreamSink sink = [outbox](StreamChunk chunk) {
    absl::MutexLock lock(&outbox->mu);
    if (outbox->reactor != nullptr) outbox->reactor->Push(std::move(chunk));
  };
  const absl::Status submitted = engine_->Submit(std::move(request), std::move(sink));
  if (!submitted.ok()) Reject(submitted);
}

void GenerateReactor::Reject(const absl::Status& status) {
  if (metrics_ != nullptr) metrics_->OnRejected();
  // Overload (the waiting queue full) is the operator's to see at the default log level; it is
  // what the RtgenRejectingRequests alert asks about. At most one line a second.
  static LogThrottle overload_log(absl::Seconds(1));  // shared by every stream
  if (absl::IsResourceExhausted(status) && overload_log.Due(absl::Now())) {
    spdlog::warn("generate {} rejected: {}", client_id_, status.ToString());
  } else {
    spdlog::debug("generate {} rejected: {}", client_id_, status.ToString());
  }
  absl::MutexLock lock(&outbox_->mu);
  FinishOnce(ToGrpcStatus(status));
}

void GenerateReactor::Push(StreamChunk chunk) {
  if (final_received_) return;
  const bool last = chunk.finish != FinishReason::kNone;
  if (last) {
    final_received_ = true;
    final_status_ = FinalStatus(chunk);
  }
  v1::GenerateResponse response = ChunkToResponse(chunk, client_id_);
  const size_t bytes = response.ByteSizeLong();
  if (!pending_.empty() && pending_back_bytes_ + bytes <= kMaxCoalescedBytes) {
    MergeInto(pending_.back(), response);  // the client is slower than the engine: coalesce
    pending_back_bytes_ += bytes;
  } else {
    // A new message, so a client that stalls for a long stream still gets messages far under
    // its receive limit (4 MiB by default) rather than the rest of the stream as one.
    pending_.push_back(std::move(response));
    pending_back_bytes_ = bytes;
  }
  MaybeStartWrite();
}

void GenerateReactor::MaybeStartWrite() {
  if (write_in_flight_ || finished_ || pending_.empty()) return;
  in_flight_ = std::move(pending_.front());
  pending_.pop_front();
  in_flight_is_final_ = in_flight_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
  write_in_flight_ = true;
  in_flight_bytes_ = SerializeToByteBuffer(in_flight_);
  StartWrite(&in_flight_bytes_);
}

void GenerateReactor::FinishOnce(grpc::Status status) {
  if (finished_) return;
  finished_ = true;
  pending_.clear();
  Finish(std::move(status));
}

void GenerateReactor::OnWriteDone(bool ok) {
  bool cancel_engine = false;
  {
    absl::MutexLock lock(&outbox_->mu);
    write_in_flight_ = false;
    if (!ok || cancelled_) {
      // The client went away (or the call was cancelled): stop generating for it.
      cancel_engine = !final_received_;
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed"));
    } else if (in_flight_is_final_) {
      spdlog::debug("generate {} finished: {}", client_id_,
                    v1::FinishReason_Name(in_flight_.finish_reason()));
      FinishOnce(final_status_);
    } else {
      MaybeStartWrite();
    }
  }
  // Outside our lock: the engine may hold its own lock while calling our sink.
  if (cancel_engine) engine_->Cancel(engine_id_);
}

void GenerateReactor::OnCancel() {
  // Copies: once Finish is called, OnDone may delete this reactor on another thread.
  Engine* engine = engine_;
  const std::string engine_id = engine_id_;
  {
    absl::MutexLock lock(&outbox_->mu);
    cancelled_ = true;
    // With a write in flight, its OnWriteDone(false) finishes the call.
    if (!write_in_flight_) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled"));
    }
  }
  engine->Cancel(engine_id);
}

void GenerateReactor::OnDone() {
  {
    absl::MutexLock lock(&outbox_->mu);
    outbox_->reactor = nullptr;
  }
  std::function<void()> on_done = std::move(on_done_);
  delete this;
  if (on_done) on_done();
}

}  // namespace rtgen
