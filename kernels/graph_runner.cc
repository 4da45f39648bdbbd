#include "kernels/graph_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"

namespace rtgen {

std::vector<int32_t> DefaultGraphBuckets(int32_t max_batch) {
  std::vector<int32_t> out;
  for (int32_t b : {1, 2, 4, 8, 16, 24, 32}) {
    if (b <= max_batch) out.push_back(b);
  }
  for (int32_t b = 48; b <= max_batch; b += 16) out.push_back(b);
  if (max_batch > 0 && (out.empty() || out.back() != max_batch)) out.push_back(max_batch);
  return out;
}

absl::StatusOr<std::unique_ptr<GraphRunner>> GraphRunner::Capture(std::vector<int32_t> buckets,
                                                                  const RecordFn& prepare,
                                                                  const RecordFn& record,
                                                                  cudaStream_t stream) {
  std::unique_ptr<GraphRunner> runner(new GraphRunner());
  std::sort(buckets.begin(), buckets.end(), std::greater<>());
  for (int32_t bucket : buckets) {
    if (bucket <= 0 || runner->graphs_.count(bucket)) continue;
    RETURN_IF_ERROR(prepare(bucket));
    RETURN_IF_ERROR(record(bucket));  // warm-up, eager
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    RETURN_IF_ERROR(prepare(bucket));
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const absl::Status recorded = record(bucket);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (!recorded.ok()) {
      if (graph) cudaGraphDestroy(graph);
      return absl::InternalError(
          absl::StrCat("capturing the decode graph for batch ", bucket, ": ", recorded.message()));
    }
    RTGEN_CUDA_RETURN_IF_ERROR(ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    RTGEN_CUDA_RETURN_IF_ERROR(inst);
    runner->graphs_[bucket] = exec;
    RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphUpload(exec, stream));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return runner;
}

GraphRunner::~GraphRunner() {
  for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
}

int32_t GraphRunner::BucketFor(int32_t batch) const {
  const auto it = graphs_.lower_bound(batch);
  return it == graphs_.end() ? 0 : it->first;
}

absl::Status GraphRunner::Replay(int32_t bucket, cudaStream_t stream) const {
  const auto it = graphs_.find(bucket);
  if (it == graphs_.end()) {
    return absl::InternalError(absl::StrCat("no decode graph captured for batch ", bucket));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second, stream));
  return absl::OkStatus();
}

std::vector<int32_t> GraphRunner::buckets() const {
  std::vector<int32_t> out;
  for (const auto& [bucket, exec] : graphs_) out.push_back(bucket);
  return out;
}

}  // namespace rtgen
