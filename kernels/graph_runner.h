#pragma once
// CUDA graphs of one kind of step, one per size bucket and variant. Capture runs the step's
// recording function once eagerly (warm-up: lazy module loading, cuBLASLt algorithm choice) and
// once under stream capture, largest bucket first. Every buffer the graphs touch is preallocated
// by the backend (step buffers, activations, KV pool, matmul workspace), so all graphs share
// that one pool of memory and nothing is allocated during capture or replay.
//
// Decode graphs: the bucket is the batch size, the variant a context class, an upper bound on
// the step's longest context: decode attention's key partitions are planned for it
// (ModelForward::DecodeContextBounds), so a step of short contexts replays a graph without the
// partitions that would hold no keys. Prefill graphs (cuda_backend.h): the bucket is the token
// count, the variant the logits rows: 0 or 1 for one sequence's chunk (no logits, or its last
// row sampled), 2 or more for as many sequences' chunks, decode rows among them (a mixed step),
// a logits row each (ForwardShape::PrefillGraph).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/graph_buckets.h"

namespace rtgen {

class GraphRunner {
 public:
  // prepare(bucket, variant) fills the step buffers for an all-padding step of that bucket and
  // variant before each recording (outside the capture).
  using PrepareFn = std::function<absl::Status(int32_t bucket, int32_t variant)>;
  // record(bucket, variant) enqueues one step of that bucket and variant (decode: `bucket` rows
  // planned for contexts up to `variant`) on `stream` (no sync, no alloc).
  using RecordFn = std::function<absl::Status(int32_t bucket, int32_t variant)>;
  // variants(bucket): its variants, not empty (decode: its context classes).
  using VariantsFn = std::function<std::vector<int32_t>(int32_t bucket)>;
  // retarget(graph, bucket, slot): points the host-side copies of `bucket`'s captured graph at
  // host slot `slot` (step_buffers.h RetargetGraphCopies); graphs are captured for slot 0.
  // False: the graph has none (one instantiation serves every slot).
  using RetargetFn =
      std::function<absl::StatusOr<bool>(cudaGraph_t graph, int32_t bucket, int32_t slot)>;

  // `kind` names the step in errors ("decode", "prefill"). With `retarget`, each graph that has
  // host-side copies is instantiated once per host slot (kSlots), retargeted before each
  // instantiation but the first; any other, once, for every slot.
  static absl::StatusOr<std::unique_ptr<GraphRunner>> Capture(
      const char* kind, std::vector<int32_t> buckets, const VariantsFn& variants,
      const PrepareFn& prepare, const RecordFn& record, cudaStream_t stream,
      const RetargetFn& retarget = nullptr);
  static constexpr int32_t kSlots = 2;  // StepBuffers::kHostSlots
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Smallest captured bucket >= size, or 0 when size exceeds the largest.
  int32_t BucketFor(int32_t size) const;
  // The captured variant of `bucket` for a step that needs at least `least` (decode: its longest
  // context): the smallest variant >= least (the largest when none is); 0 for a bucket not
  // captured.
  int32_t VariantFor(int32_t bucket, int32_t least) const;
  // The smallest captured variant of `bucket` >= least; -1 when there is none.
  int32_t VariantAtLeast(int32_t bucket, int32_t least) const;
  // Launches the graph of `bucket` and `variant` instantiated for host slot `slot`.
  absl::Status Replay(int32_t bucket, int32_t variant, cudaStream_t stream,
                      int32_t slot = 0) const;
  std::vector<int32_t> buckets() const;
  // Graphs captured (every bucket's variants of at least min_variant).
  size_t num_graphs(int32_t min_variant = std::numeric_limits<int32_t>::min()) const;

 private:
  explicit GraphRunner(const char* kind) : kind_(kind) {}
  const char* kind_;
  // Per bucket: its variants' graphs, one per host slot (or one for every slot).
  std::map<int32_t, std::map<int32_t, std::vector<cudaGraphExec_t>>> graphs_;
};

}  // namespace rtgen
