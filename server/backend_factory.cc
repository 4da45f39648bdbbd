#include "server/backend_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rtgen {

bool CudaBackendAvailable() {
  // No CUDA backend is compiled in yet; the CUDA build adds its device probe here.
  return false;
}

absl::StatusOr<std::string> ResolveBackendKind(const std::string& kind) {
  if (kind == "auto") return std::string(CudaBackendAvailable() ? "cuda" : "cpu");
  if (kind == "cpu") return kind;
  if (kind == "cuda") {
    if (CudaBackendAvailable()) return kind;
    return absl::FailedPreconditionError(
        "backend: 'cuda' requested but this build has no CUDA backend or no GPU is visible; "
        "use --backend=cpu or --backend=auto");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: unknown backend '", kind, "' (expected auto, cpu or cuda)"));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       LoadedModel& model) {
  absl::StatusOr<std::string> kind = ResolveBackendKind(options.kind);
  if (!kind.ok()) return kind.status();
  (void)model;
  return absl::UnimplementedError(absl::StrCat("backend: '", *kind, "' is not built yet"));
}

}  // namespace rtgen
