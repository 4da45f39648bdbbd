#pragma once
// CUDA graphs for decode steps, one per batch-size bucket. Capture runs the step's recording
// function once eagerly (warm-up: lazy module loading, cuBLASLt algorithm choice) and once under
// stream capture, largest bucket first. Every buffer the graphs touch is preallocated by the
// backend (step buffers, activations, KV pool, matmul workspace), so all graphs share that one
// pool of memory and nothing is allocated during capture or replay.

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace rtgen {

// 1, 2, 4, 8, 16, 24, 32, then every 16 up to max_batch (max_batch itself always included).
std::vector<int32_t> DefaultGraphBuckets(int32_t max_batch);

class GraphRunner {
 public:
  // record(bucket) enqueues one decode step of `bucket` rows on `stream` (no sync, no alloc).
  using RecordFn = std::function<absl::Status(int32_t bucket)>;

  // prepare(bucket) fills the step buffers for an all-padding step before each recording.
  static absl::StatusOr<std::unique_ptr<GraphRunner>> Capture(std::vector<int32_t> buckets,
                                                              const RecordFn& prepare,
                                                              const RecordFn& record,
                                                              cudaStream_t stream);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Smallest captured bucket >= batch, or 0 when batch exceeds the largest.
  int32_t BucketFor(int32_t batch) const;
  absl::Status Replay(int32_t bucket, cudaStream_t stream) const;
  std::vector<int32_t> buckets() const;

 private:
  GraphRunner() = default;
  std::map<int32_t, cudaGraphExec_t> graphs_;
};

}  // namespace rtgen
