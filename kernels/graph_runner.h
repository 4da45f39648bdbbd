#pragma once
// CUDA graphs for decode steps, one per batch-size bucket and context class. Capture runs the
// step's recording function once eagerly (warm-up: lazy module loading, cuBLASLt algorithm
// choice) and once under stream capture, largest bucket first. Every buffer the graphs touch is
// preallocated by the backend (step buffers, activations, KV pool, matmul workspace), so all
// graphs share that one pool of memory and nothing is allocated during capture or replay.
//
// A context class is an upper bound on the step's longest context: decode attention's key
// partitions are planned for it (ModelForward::DecodeContextBounds), so a step of short contexts
// replays a graph without the partitions that would hold no keys.

#include <cuda_runtime.h>

#include <cstddef>
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
  // prepare(bucket) fills the step buffers for an all-padding step before each recording.
  using PrepareFn = std::function<absl::Status(int32_t bucket)>;
  // record(bucket, context_bound) enqueues one decode step of `bucket` rows planned for contexts
  // up to context_bound on `stream` (no sync, no alloc).
  using RecordFn = std::function<absl::Status(int32_t bucket, int32_t context_bound)>;
  // bounds(bucket): its context classes, increasing and not empty.
  using BoundsFn = std::function<std::vector<int32_t>(int32_t bucket)>;

  static absl::StatusOr<std::unique_ptr<GraphRunner>> Capture(std::vector<int32_t> buckets,
                                                              const BoundsFn& bounds,
                                                              const PrepareFn& prepare,
                                                              const RecordFn& record,
                                                              cudaStream_t stream);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Smallest captured bucket >= batch, or 0 when batch exceeds the largest.
  int32_t BucketFor(int32_t batch) const;
  // The captured class of `bucket` for a step whose longest context is `longest`: the smallest
  // bound >= longest (the largest when none is); 0 for a bucket not captured.
  int32_t ContextBoundFor(int32_t bucket, int32_t longest) const;
  absl::Status Replay(int32_t bucket, int32_t context_bound, cudaStream_t stream) const;
  std::vector<int32_t> buckets() const;
  // Graphs captured (every bucket's classes).
  size_t num_graphs() const;

 private:
  GraphRunner() = default;
  // Per bucket: its classes' graphs by context bound.
  std::map<int32_t, std::map<int32_t, cudaGraphExec_t>> graphs_;
};

}  // namespace rtgen
