#pragma once
// Host side of the persistent batch-1 decode kernel (persistent_decode.h): owns its layer table
// and workspace and launches it. When enabled, ModelForward runs a decode step of one sequence
// through it instead of the ~5 kernels per layer.
//
// Opt-in (CudaBackendOptions::persistent_decode, or RTGEN_PERSISTENT_DECODE=1): on the H200 it
// is correct but still slower than the layered kernels under PDL (SmolLM2-135M batch 1: 0.50
// vs 0.43 ms; docs/perf/gpu_notes.md, session 27), so it is off by default. Models whose layer
// does not fit two copies of each block's share in shared memory (Llama-3.2-1B and up) keep
// the layered path.

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kernels/device_buffer.h"
#include "kernels/device_weights.h"
#include "kernels/persistent_decode.h"
#include "kernels/step_buffers.h"

namespace rtgen {

struct KvPool;  // kernels/model_forward.h

// Activations the kernel reads and writes, owned by ModelForward.
struct PersistentActivations {
  const float* residual = nullptr;     // f32 [hidden], the embedding row
  float* logits = nullptr;             // [vocab]
};

// Whether to build the persistent path: RTGEN_PERSISTENT_DECODE=1 / =0 in the environment
// overrides `option` (for A/B runs of the benchmarks).
bool PersistentDecodeWanted(bool option);

class PersistentDecoder {
 public:
  // Null (not an error) when the shapes or the device do not support the kernel: the caller
  // keeps the layered path.
  static absl::StatusOr<std::unique_ptr<PersistentDecoder>> CreateIfSupported(
      const ModelConfig& config, const DeviceWeights& weights);

  // Runs every layer, the final norm and the LM head for the single token of step row 0
  // (positions, slot_mapping, context_lens, block table row 0).
  absl::Status Run(const StepArrays& step, const KvPool& kv, const PersistentActivations& a,
                   cudaStream_t stream);

  int32_t grid() const { return launch_.grid; }

  // With RTGEN_PERSISTENT_TRACE=1, prints where the last step's time went (phase stamps).
  ~PersistentDecoder();

 private:
  PersistentDecoder() = default;

  kernels::PersistentDecodeParams params_;  // weights, shapes and workspace; step parts per Run
  kernels::PersistentLaunch launch_;
  DeviceBuffer layers_;       // PersistentLayer [num_layers]
  DeviceBuffer exchange_;     // u64 [PersistentExchangeWords]: flagged words, zero at first
  DeviceBuffer epoch_;        // u32 [2]: launches done, blocks done
  DeviceBuffer trace_;        // u64 phase stamps (RTGEN_PERSISTENT_TRACE=1), else empty
};

}  // namespace rtgen
