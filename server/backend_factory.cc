#include "server/backend_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/cpu_backend.h"
#ifdef RTGEN_HAVE_CUDA
#include "kernels/cuda_backend.h"
#endif

namespace rtgen {

bool CudaBackendAvailable() {
#ifdef RTGEN_HAVE_CUDA
  return CudaDeviceAvailable();
#else
  return false;
#endif
}

absl::StatusOr<std::string> ResolveBackendKind(const std::string& kind) {
  if (kind == "auto") return std::string(CudaBackendAvailable() ? "cuda" : "cpu");
  if (kind == "cpu") return kind;
  if (kind == "cuda") {
    if (CudaBackendAvailable()) return kind;
    return absl::FailedPreconditionError(
        "backend: 'cuda' requested but this build has no CUDA backend, no GPU is visible, or "
        "this build has no device code for the GPU (the default build is for sm_90a: H100, "
        "H200); use --backend=cpu or --backend=auto");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: unknown backend '", kind, "' (expected auto, cpu or cuda)"));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       LoadedModel& model) {
  absl::StatusOr<std::string> kind = ResolveBackendKind(options.kind);
  if (!kind.ok()) return kind.status();
  if (*kind == "cpu") {
    CpuBackendOptions cpu;
    cpu.num_threads = options.threads;
    if (options.cpu_weight_dtype == "f32") {
      cpu.weight_dtype = WeightDtype::kF32;
    } else if (options.cpu_weight_dtype == "bf16") {
      cpu.weight_dtype = WeightDtype::kBf16;
    } else if (options.cpu_weight_dtype == "native") {
      cpu.weight_dtype = WeightDtype::kNative;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("cpu-weight-dtype: unknown dtype '",
                                                     options.cpu_weight_dtype,
                                                     "' (expected native, bf16 or f32)"));
    }
    absl::StatusOr<std::unique_ptr<CpuBackend>> backend =
        CpuBackend::Create(model.config, std::move(model.weights), cpu);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<Backend>(*std::move(backend));
  }
#ifdef RTGEN_HAVE_CUDA
  CudaBackendOptions cuda;
  cuda.max_num_seqs = options.max_num_seqs;
  cuda.max_num_tokens = options.max_num_batched_tokens;
  cuda.max_model_len = options.max_model_len;
  cuda.enable_cuda_graphs = options.enable_cuda_graphs;
  cuda.max_penalty_tokens = options.max_penalty_tokens;
  return CreateCudaBackend(model.config, std::move(model.weights), cuda);
#else
  return absl::UnimplementedError(absl::StrCat("backend: '", *kind, "' is not built in"));
#endif
}

std::string GraphCaptureSummary(const Backend& backend) {
#ifdef RTGEN_HAVE_CUDA
  const auto* cuda = dynamic_cast<const CudaBackend*>(&backend);
  if (cuda != nullptr && cuda->graph_count() > 0) {
    const std::vector<int32_t> prefill = cuda->prefill_graph_tokens();
    return absl::StrFormat(
        "CUDA graphs: %d buckets, %d graphs, prefill tokens [%s] (%d multi-sequence graphs), "
        "captured in %.2f s, %.1f MiB",
        cuda->graph_buckets().size(), cuda->graph_count(), absl::StrJoin(prefill, ","),
        cuda->mixed_graph_count(),
        cuda->graph_capture_seconds(),
        static_cast<double>(cuda->graph_capture_bytes()) / (1 << 20));
  }
#else
  (void)backend;
#endif
  return "";
}

std::vector<int32_t> PrefillGraphTokens(const Backend& backend) {
#ifdef RTGEN_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&backend)) {
    return cuda->prefill_graph_tokens();
  }
#else
  (void)backend;
#endif
  return {};
}

std::vector<int32_t> GraphBuckets(const Backend& backend) {
#ifdef RTGEN_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&backend)) return cuda->graph_buckets();
#else
  (void)backend;
#endif
  return {};
}

}  // namespace rtgen
