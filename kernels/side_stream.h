#pragma once
// A second stream for work that may run beside the main stream's (a fork and a join by events),
// in eager steps and under graph capture alike: captured, the fork puts the side stream into the
// main stream's capture and the join brings its work back, so the graph gets a parallel branch.

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rtgen::kernels {

class SideStream {
 public:
  static absl::StatusOr<std::unique_ptr<SideStream>> Create();
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // Work launched on stream() after Fork(main) follows what was launched on `main` before it.
  absl::Status Fork(cudaStream_t main);
  // Work launched on `main` after Join(main) follows what was launched on stream() before it.
  absl::Status Join(cudaStream_t main);
  cudaStream_t stream() const { return stream_; }

 private:
  SideStream() = default;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr;
  cudaEvent_t joined_ = nullptr;
};

}  // namespace rtgen::kernels
