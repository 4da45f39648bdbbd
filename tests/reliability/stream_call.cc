#include "tests/reliability/stream_call.h"

#include <utility>

#include "absl/time/clock.h"

namespace rtgen::reliability {

StreamCall::StreamCall(v1::Inference::Stub* stub, v1::GenerateRequest request,
                       int cancel_after_messages, absl::Duration timeout)
    : stub_(stub), request_(std::move(request)), cancel_after_messages_(cancel_after_messages) {
  if (timeout != absl::InfiniteDuration()) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

void StreamCall::Start() {
  stub_->async()->Generate(&context_, &request_, this);
  StartRead(&response_);
  StartCall();
  if (cancel_after_messages_ == 0) context_.TryCancel();
}

void StreamCall::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  ++messages_;
  tokens_ += response_.token_ids_size();
  if (response_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    finish_reason_ = response_.finish_reason();
  }
  if (cancel_after_messages_ > 0 && messages_ == cancel_after_messages_) context_.TryCancel();
  StartRead(&response_);
}

void StreamCall::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  status_ = status;
  done_ = true;
}

bool StreamCall::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

std::vector<std::shared_ptr<grpc::Channel>> DistinctChannels(const std::string& target,
                                                             int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("rtgen.test.channel_index", i);  // distinct args: never a shared connection
    channels.push_back(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

}  // namespace rtgen::reliability
