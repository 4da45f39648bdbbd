#pragma once
// The CUDA backend: bf16 weights and activations (fp32 residual stream, norms and accumulation),
// a paged bf16 KV pool, eager execution of any step, and CUDA-graph replay of decode-only steps
// padded to batch buckets and of prefill or mixed steps padded to token buckets (and sequence
// counts) where the padding costs less than the launches saved. Sampling
// runs on the device (only token ids and logprobs come back, and top-n logprobs for rows asking
// for them), penalties included (their distinct prompt and
// output tokens uploaded with the step, the pending last token read on the device;
// kernels/sample_penalties.h); requests with penalties reading more than max_penalty_tokens
// tokens are sampled on the host from their logits row with the CPU sampler. Every
// SamplingParams feature behaves as on the CPU backend: the penalized logits are the CPU's bit
// for bit.

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "kernels/sample_penalties.h"

namespace rtgen {

struct DeviceWeights;  // kernels/device_weights.h

struct CudaBackendOptions {
  int32_t device = 0;
  int32_t max_num_tokens = 8192;   // tokens per step (prefill chunk plus decodes)
  int32_t max_num_seqs = 256;      // sequences per step
  int32_t max_model_len = 0;       // longest sequence in tokens; 0: the model's trained length
  bool enable_cuda_graphs = true;          // false: every step runs eagerly
  int32_t max_graph_batch_size = 0;        // 0: max_num_seqs
  std::vector<int32_t> graph_batch_sizes;  // empty: DefaultGraphBuckets(max_graph_batch_size)
  // With graphs on, a step that prefills one sequence's chunk of at most this many tokens (and
  // samples at most its last) replays a graph captured for the smallest token bucket that holds
  // it, the chunk padded with rows that attend to nothing and store no keys: a short prompt's
  // prefill is otherwise bound by the host's launches. Not where the padding rows would cost
  // more than the launches saved (graph_buckets.h PrefillPaddingPays: Llama-3-8B pads at most
  // ~10 tokens past 128). 0: prefill steps run eagerly.
  int32_t max_prefill_graph_tokens = 512;
  // The token buckets; empty: DefaultPrefillGraphTokens(min(max_prefill_graph_tokens,
  // max_num_tokens)). A list given here is captured as it is, whatever max_prefill_graph_tokens.
  std::vector<int32_t> prefill_graph_tokens = {};
  // With prefill graphs, a step of several sequences' chunks (decode rows among them: a mixed
  // step) replays a graph of the same token buckets captured for 2, 4, 8, ... sequences
  // (DefaultMixedGraphSeqs), a logits row per sequence. RTGEN_MIXED_GRAPHS=0 turns them off.
  bool mixed_prefill_graphs = true;
  bool use_gemv = true;            // custom GEMV for small batches (matmul.cc GemvShape)
  // Batch-1 decode as one persistent kernel where the shapes allow (opt-in: slower than the
  // layered kernels on the H200 so far; RTGEN_PERSISTENT_DECODE=1/0 overrides).
  bool persistent_decode = false;
  // Decode steps of up to this many sequences link their norms through the GEMVs
  // (ModelForward::LinksNorms; the kernels take up to 16 rows; RTGEN_NORM_LINK_ROWS overrides).
  // 16 measured faster than 8 with the qkv RoPE fused at those rows too (session 32, H200, graph
  // TPOT ms, 128 steps, two rounds: SmolLM2-135M b9 0.612-0.619 -> 0.582-0.583, b12 0.614-0.620 ->
  // 0.583-0.586, b16 0.615-0.622 -> 0.583-0.589; links alone were 0.003-0.006 ms slower).
  int32_t max_norm_link_rows = 16;
  // A request with penalties is penalized on the device while the tokens they read (prompt and
  // output with a repetition penalty, else the output) are at most this many (0: always on the
  // host). The step buffers hold max_num_seqs times as many 8-byte entries (at most the
  // vocabulary's) on the device and twice that pinned on the host (8 and 16 MiB at 256).
  int32_t max_penalty_tokens = kernels::kDefaultMaxPenaltyTokens;
};

// True when the CUDA runtime sees a device (device 0) that this build has device code for.
bool CudaDeviceAvailable();

// Uploads `weights` (converted to bf16) to options.device. Graphs are captured in
// AllocateKvCache, once the KV pool exists.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelConfig& config,
                                                           ModelWeights weights,
                                                           const CudaBackendOptions& options);

class CudaBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const ModelConfig& config,
                                                             ModelWeights weights,
                                                             const CudaBackendOptions& options);
  // Takes weights already resident on options.device (e.g. CreateRandomDeviceWeights).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> CreateWithDeviceWeights(
      const ModelConfig& config, DeviceWeights weights, const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  absl::Status AllocateKvCache(const KvCacheShape& shape) override;
  int64_t KvBytesPerBlock(int32_t block_size) const override;
  absl::StatusOr<StepOutput> Execute(const StepInput& input) override;
  absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput& input) override;
  // Queues the step on the backend's stream (upload, graph or eager forward, download) and
  // returns. A pending token is read on the device from the sampled tokens of the step launched
  // before, which must still be in flight (the engine launches N+1 before it collects N).
  absl::Status Launch(const StepInput& input) override;
  absl::StatusOr<StepOutput> Collect() override;
  bool OverlapsSteps() const override { return true; }
  // Rows sampled on the host in Collect (penalties over more than max_penalty_tokens tokens)
  // do not chain.
  bool ChainsSample(const SampleRequest& sample) const override;

  // Captured decode buckets, ascending (empty before AllocateKvCache or with graphs off).
  std::vector<int32_t> graph_buckets() const;
  // Decode graphs captured: one per bucket and context class (graph_runner.h).
  size_t graph_count() const;
  // Decode steps queued as a graph replay since creation (ComputeLogits's too, whose steps
  // replay the same graphs and leave the sampled tokens unread).
  int64_t decode_graph_replays() const;
  // Testing: the next step that runs eagerly fails after queuing `layers` layers
  // (ModelForward::FailNextRunAfterLayersForTesting), as a step failing partway would.
  void FailNextEagerStepAfterLayersForTesting(int32_t layers);
  // Captured prefill token buckets, ascending (graphs of one sequence's chunk sampling its last
  // row or none, and multi-sequence ones).
  std::vector<int32_t> prefill_graph_tokens() const;
  // Multi-sequence prefill graphs captured (every token bucket's sequence counts).
  size_t mixed_graph_count() const;
  int64_t weight_bytes() const;
  // True when batch-1 decode steps run as the persistent kernel (options and shapes allow it).
  bool persistent_decode() const;
  // True when a decode step of `rows` sequences links its norms through the GEMVs
  // (ModelForward::LinksNorms).
  bool links_norms_at(int32_t rows) const;
  // And its final norm too (ModelForward::LinksFinalNorm; otherwise the final norm is a launch).
  bool links_final_norm_at(int32_t rows) const;
  // True when a decode step of `rows` sequences whose longest context is longest_context (its
  // context class, as Step chooses it) has the o projection merge attention's key partitions
  // (ModelForward::MergesInO).
  bool merges_in_o_at(int32_t rows, int32_t longest_context) const;
  // True when a decode step of `rows` sequences runs with folded norms (ModelForward::FoldsNorms).
  bool folds_norms_at(int32_t rows) const;
  // True when a decode step of `rows` sequences has decode attention copy its older keys before
  // its PDL wait, the qkv projection releasing it early (ModelForward::PrefetchesKv).
  bool prefetches_kv_at(int32_t rows) const;
  int32_t max_model_len() const { return max_model_len_; }
  // Start-up cost of the last graph capture (AllocateKvCache; decode and prefill graphs): wall
  // seconds, and the growth of the device's used memory across it (graph executables, lazily
  // loaded modules, cuBLASLt).
  double graph_capture_seconds() const { return graph_capture_seconds_; }
  int64_t graph_capture_bytes() const { return graph_capture_bytes_; }

 private:
  struct Impl;
  struct StepPlan;
  CudaBackend(const ModelConfig& config, const CudaBackendOptions& options);
  absl::Status CheckStep(const StepInput& input) const;
  // Fills the step buffers of a free host slot and queues the step (graph or eager); its plan
  // goes to the in-flight queue.
  absl::Status LaunchStep(const StepInput& input, bool sample);
  // Waits for the oldest launched step and hands back its plan.
  absl::StatusOr<StepPlan> WaitOldest();
  // The logits row of the step in flight whose token PendingToken `token_id` names; -1 when no
  // sampling step is in flight or it has no such sample.
  int32_t PendingRow(int32_t token_id) const;
  absl::Status CaptureGraphs();
  absl::Status CapturePrefillGraphs();

  ModelConfig config_;
  CudaBackendOptions options_;
  int32_t max_model_len_ = 0;
  double graph_capture_seconds_ = 0.0;
  int64_t graph_capture_bytes_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rtgen
