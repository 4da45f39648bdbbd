#include "kernels/side_stream.h"

#include "kernels/cuda_check.h"

namespace rtgen::kernels {

absl::StatusOr<std::unique_ptr<SideStream>> SideStream::Create() {
  std::unique_ptr<SideStream> s(new SideStream());
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s->stream_, cudaStreamNonBlocking));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->forked_, cudaEventDisableTiming));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s->joined_, cudaEventDisableTiming));
  return s;
}

SideStream::~SideStream() {
  // Errors cannot be reported from a destructor; a failure here means the context is gone.
  if (joined_ != nullptr) cudaEventDestroy(joined_);
  if (forked_ != nullptr) cudaEventDestroy(forked_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status SideStream::Fork(cudaStream_t main) {
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventRecord(forked_, main));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, forked_, 0));
  return absl::OkStatus();
}

absl::Status SideStream::Join(cudaStream_t main) {
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventRecord(joined_, stream_));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(main, joined_, 0));
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
