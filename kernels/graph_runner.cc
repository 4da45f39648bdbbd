#include "kernels/graph_runner.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"

namespace rtgen {

absl::StatusOr<std::unique_ptr<GraphRunner>> GraphRunner::Capture(const char* kind,
                                                                  std::vector<int32_t> buckets,
                                                                  const VariantsFn& variants,
                                                                  const PrepareFn& prepare,
                                                                  const RecordFn& record,
                                                                  cudaStream_t stream,
                                                                  const RetargetFn& retarget) {
  std::unique_ptr<GraphRunner> runner(new GraphRunner(kind));
  std::sort(buckets.begin(), buckets.end(), std::greater<>());
  for (int32_t bucket : buckets) {
    if (bucket <= 0 || runner->graphs_.count(bucket)) continue;
    std::vector<int32_t> all = variants(bucket);
    if (all.empty()) {
      return absl::InternalError(absl::StrCat("no ", kind, " graph variants for size ", bucket));
    }
    std::sort(all.begin(), all.end(), std::greater<>());
    std::map<int32_t, std::vector<cudaGraphExec_t>>& graphs = runner->graphs_[bucket];
    for (const int32_t variant : all) {
      if (graphs.count(variant)) continue;
      RETURN_IF_ERROR(prepare(bucket, variant));
      RETURN_IF_ERROR(record(bucket, variant));  // warm-up, eager
      RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      RETURN_IF_ERROR(prepare(bucket, variant));
      RTGEN_CUDA_RETURN_IF_ERROR(
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const absl::Status recorded = record(bucket, variant);
      cudaGraph_t graph = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
      if (!recorded.ok()) {
        if (graph) cudaGraphDestroy(graph);
        return absl::InternalError(absl::StrCat("capturing the ", kind, " graph of size ", bucket,
                                                " (variant ", variant,
                                                "): ", recorded.message()));
      }
      RTGEN_CUDA_RETURN_IF_ERROR(ended);
      std::vector<cudaGraphExec_t>& execs = graphs[variant];
      auto instantiate = [&]() -> absl::Status {
        for (int32_t slot = 0; slot < (retarget ? kSlots : 1); ++slot) {
          if (slot > 0) {
            ASSIGN_OR_RETURN(const bool moved, retarget(graph, bucket, slot));
            if (!moved) break;  // nothing slot-dependent: the first instantiation serves all
          }
          cudaGraphExec_t exec = nullptr;
          RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
          execs.push_back(exec);
          RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphUpload(exec, stream));
        }
        return absl::OkStatus();
      };
      const absl::Status instantiated = instantiate();
      cudaGraphDestroy(graph);
      RETURN_IF_ERROR(instantiated);
    }
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return runner;
}

GraphRunner::~GraphRunner() {
  for (auto& [bucket, graphs] : graphs_) {
    for (auto& [variant, execs] : graphs) {
      for (cudaGraphExec_t exec : execs) cudaGraphExecDestroy(exec);
    }
  }
}

int32_t GraphRunner::BucketFor(int32_t size) const {
  const auto it = graphs_.lower_bound(size);
  return it == graphs_.end() ? 0 : it->first;
}

int32_t GraphRunner::VariantFor(int32_t bucket, int32_t least) const {
  const auto it = graphs_.find(bucket);
  if (it == graphs_.end() || it->second.empty()) return 0;
  const auto variant = it->second.lower_bound(least);
  return variant == it->second.end() ? it->second.rbegin()->first : variant->first;
}

int32_t GraphRunner::VariantAtLeast(int32_t bucket, int32_t least) const {
  const auto it = graphs_.find(bucket);
  if (it == graphs_.end()) return -1;
  const auto variant = it->second.lower_bound(least);
  return variant == it->second.end() ? -1 : variant->first;
}

absl::Status GraphRunner::Replay(int32_t bucket, int32_t variant, cudaStream_t stream,
                                 int32_t slot) const {
  const auto it = graphs_.find(bucket);
  if (it != graphs_.end()) {
    if (const auto graph = it->second.find(variant); graph != it->second.end()) {
      const std::vector<cudaGraphExec_t>& execs = graph->second;
      if (slot < 0 || slot >= kSlots) {
        return absl::InvalidArgumentError(
            absl::StrCat("host slot ", slot, " is outside [0, ", kSlots, ")"));
      }
      const size_t index = execs.size() == 1 ? 0 : static_cast<size_t>(slot);
      RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(execs[index], stream));
      return absl::OkStatus();
    }
  }
  return absl::InternalError(absl::StrCat("no ", kind_, " graph captured of size ", bucket,
                                          " (variant ", variant, ")"));
}

std::vector<int32_t> GraphRunner::buckets() const {
  std::vector<int32_t> out;
  for (const auto& [bucket, graphs] : graphs_) out.push_back(bucket);
  return out;
}

size_t GraphRunner::num_graphs(int32_t min_variant) const {
  size_t n = 0;
  for (const auto& [bucket, graphs] : graphs_) {
    n += std::distance(graphs.lower_bound(min_variant), graphs.end());
  }
  return n;
}

}  // namespace rtgen
