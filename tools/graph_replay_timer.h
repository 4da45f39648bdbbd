#pragma once
// The benchmarks' timing loop for an instantiated CUDA graph: `warmups` untimed replays, then
// `repeats` replays, each between two events on the stream; appends ms per replay to `ms`.
// Returns the first CUDA error (the times gathered before it stay in `ms`).

#include <cuda_runtime.h>

#include <vector>

namespace rtgen::tools {

inline cudaError_t TimeGraphReplays(cudaGraphExec_t exec, cudaStream_t stream, int warmups,
                                    int repeats, std::vector<double>* ms) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  for (int i = 0; err == cudaSuccess && i < warmups; ++i) err = cudaGraphLaunch(exec, stream);
  for (int r = 0; err == cudaSuccess && r < repeats; ++r) {
    float elapsed = 0.0f;
    if ((err = cudaEventRecord(start, stream)) != cudaSuccess ||
        (err = cudaGraphLaunch(exec, stream)) != cudaSuccess ||
        (err = cudaEventRecord(stop, stream)) != cudaSuccess ||
        (err = cudaEventSynchronize(stop)) != cudaSuccess ||
        (err = cudaEventElapsedTime(&elapsed, start, stop)) != cudaSuccess) {
      break;
    }
    ms->push_back(elapsed);
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  return err;
}

}  // namespace rtgen::tools
