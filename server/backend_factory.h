#pragma once
// The one place that picks and builds a compute backend. The CUDA backend plugs in here.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/loader/model_loader.h"

namespace rtgen {

struct BackendOptions {
  std::string kind = "auto";             // "auto" | "cpu" | "cuda"
  int32_t threads = 0;                   // CPU worker threads; 0 = every core
  std::string cpu_weight_dtype = "native";  // CPU weight storage: "native" | "bf16" | "f32"
  // Step limits the engine will use (the CUDA backend sizes its buffers and graphs from them).
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 2048;
  bool enable_cuda_graphs = true;
  // CUDA: penalties reading more tokens than this go to the CPU sampler
  // (CudaBackendOptions::max_penalty_tokens; 0: always).
  int32_t max_penalty_tokens = 4096;
};

// True when a CUDA backend was compiled in and a GPU is visible.
bool CudaBackendAvailable();

// "auto" → "cuda" when CudaBackendAvailable(), else "cpu". INVALID_ARGUMENT for an unknown
// kind; FAILED_PRECONDITION for "cuda" when it is not available, saying why.
absl::StatusOr<std::string> ResolveBackendKind(const std::string& kind);

// Builds the backend for `model`; its weights may be moved out (the backend keeps its own copy
// in its own layout), so only config/tokenizer/chat_template stay usable afterwards.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       LoadedModel& model);

// The batch buckets `backend` replays as CUDA graphs, ascending (empty for the CPU backend and
// before the KV cache is allocated). Metrics pre-register them so their series start at zero.
std::vector<int32_t> GraphBuckets(const Backend& backend);

// The token buckets whose prefill chunks `backend` replays as CUDA graphs, ascending (empty for
// the CPU backend, before the KV cache is allocated, or with prefill graphs off).
std::vector<int32_t> PrefillGraphTokens(const Backend& backend);

// One start-up line on `backend`'s CUDA graphs: decode buckets, graphs (a bucket has one per
// context class), prefill token buckets, capture seconds and the device memory the capture took;
// empty when none were captured.
std::string GraphCaptureSummary(const Backend& backend);

}  // namespace rtgen
