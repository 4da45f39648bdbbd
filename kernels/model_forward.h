#pragma once
// The Llama forward pass on the device for one step: embedding, per layer (RMSNorm, fused qkv
// matmul, RoPE, KV store, paged attention, o-proj, residual + RMSNorm, gate/up matmul, SwiGLU,
// down-proj), final norm of the rows that need logits, LM head (fp32 logits), and optionally
// on-device sampling. It only launches work on a stream: no allocation, no synchronisation and
// no host reads of device values, so a decode step can be captured into a CUDA graph. Launch
// shapes depend only on ForwardShape, never on per-step values such as context lengths.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kernels/attention_cluster.h"
#include "kernels/decode_attention.h"
#include "kernels/device_buffer.h"
#include "kernels/device_weights.h"
#include "kernels/fused_mlp.h"
#include "kernels/matmul.h"
#include "kernels/persistent_decoder.h"
#include "kernels/side_stream.h"
#include "kernels/step_buffers.h"

namespace rtgen {

// The paged KV pool: per layer, k and v of [num_blocks, block_size, num_kv_heads, head_dim].
struct KvPool {
  DeviceBuffer k;  // bf16, all layers back to back
  DeviceBuffer v;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t layer_elems = 0;  // elements per layer
};

struct ForwardShape {
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_samples = 0;    // rows of logits (StepArrays::sample_rows)
  bool decode_only = false;   // one token per sequence, token i of sequence i
  bool sample = false;        // run the sampling kernel after the LM head
  // Decode: at least every sequence's context length, the class whose split plan decode
  // attention takes (ModelForward::DecodeContextBounds); 0: the longest context any step may
  // have. Any bound gives correct results; one near the step's longest context, fewer empty
  // key partitions.
  int32_t context_bound = 0;
  // Logits row i is token i's (StepArrays::sample_rows holds 0, 1, ...): what a step linking its
  // norms over several rows needs (its last down projection writes the final norm's rows in token
  // order).
  bool samples_in_token_order = false;
  // The step arrays are written by a kernel just before the step (StepBuffers::StageIn), not by
  // a copy: the embedding, which reads them before its PDL wait, is then a plain launch.
  bool staged_inputs = false;
  // A decode step of `rows` sequences, each sampled (a graph bucket's shape).
  static ForwardShape Decode(int32_t rows, int32_t context_bound = 0) {
    return {rows, rows, rows, true, true, context_bound, true};
  }
  // A prefill graph's step (graph_runner.h): `tokens` rows, padding included, and `logits_rows`
  // rows of logits (StepArrays::sample_rows says which): 0 or 1 for one sequence's chunk (no
  // logits, or its last real row sampled), else as many sequences' chunks, decode rows among
  // them, a logits row each (a padding sequence's names any row).
  static ForwardShape PrefillGraph(int32_t tokens, int32_t logits_rows) {
    return {tokens, std::max(logits_rows, 1), logits_rows, false, true, 0, false};
  }
};

class ModelForward {
 public:
  // max_context: the longest sequence (tokens) any step may attend to; decode attention's split
  // plan is derived from it and the batch size, or from a step's ForwardShape::context_bound
  // (at most max_context) where that is set. persistent_decode: run decode steps of
  // one sequence as one persistent kernel where the shapes allow (persistent_decoder.h; the
  // environment may override it). max_link_rows: the most sequences a decode step links its
  // norms at (LinksNorms; the environment may override it).
  static absl::StatusOr<std::unique_ptr<ModelForward>> Create(
      const ModelConfig& config, const DeviceWeights* weights, const StepCapacity& capacity,
      int32_t max_context, int32_t num_sms, bool use_gemv, bool persistent_decode,
      int32_t max_link_rows);

  // Context classes of decode steps of `rows` sequences (decode_plan.h DecodeStepContextBounds):
  // the values ForwardShape::context_bound takes for them.
  std::vector<int32_t> DecodeContextBounds(int32_t rows) const;

  // True when a decode step of one sequence runs as the persistent kernel.
  bool persistent_decode() const { return persistent_ != nullptr; }

  // Linked norms (gemv.h GemvNormLink): in a decode step of one token per sequence, every token
  // sampled in token order, at most max_link_rows of them (Create; 16 by default, the
  // kernels' kGemvMaxLinkRows; model_forward.cc LinkRows), where every layer projection
  // runs on the GEMV and, past one row, each layer weight is under 24 MiB (SmolLM2-135M at batch
  // 1-16, the Llama-3.2-1B and Llama-3-8B shapes at 1; model_forward.cc says why), the o and down
  // projections do the next norm's residual add and scaling in their epilogue and the consumer
  // applies 1/rms, so only the first layer's attention norm is a launch. Norm slot 2 * layer: the
  // FFN norm; 2 * layer + 1: the next layer's attention norm (the final norm after the last
  // layer); a slot holds one sum per row. The final norm is linked too where the LM head runs on
  // the GEMV (LinksFinalNorm: SmolLM2-135M at 1-4 rows, the others at 1); elsewhere it is a
  // launch, as without links, and the last down projection only zeroes the last FFN norm's slot.
  // RTGEN_NORM_LINK=0: never; =1: one row only; =final: only where the final norm links (A/B).
  // True when a step of this shape links its layers' norms.
  bool LinksNorms(const ForwardShape& shape) const;
  // True when a decode step of `shape` has the o projection merge decode attention's key
  // partitions as it reads them (decode_plan.h PlanDecodeStep, where the GEMV takes it; not in
  // the persistent kernel, the attention cluster or a folded step). A diagnostic that skips
  // steps' parts (RTGEN_DIAG_SKIP) is not looked at.
  bool MergesInO(const ForwardShape& shape) const;
  // True when a step of this shape links its norms and the final one too (the LM head consumes
  // it).
  bool LinksFinalNorm(const ForwardShape& shape) const;
  // Folded norms: at creation, where a decode step of max_seqs rows would take this path (its
  // qkv projection on cuBLASLt: Llama-3-8B's shapes from 9 rows, SmolLM2-135M's past the sliced
  // GEMV's 48), each layer's attention and FFN norm weights are folded into the qkv and gate/up
  // weights (norm_fold.h; the norms' weights become ones, so every other path computes the same
  // function). A decode step that then folds (not linked, qkv on cuBLASLt, RTGEN_DECODE_ROPE
  // off) keeps its residual stream in bf16 (as vLLM's and Hugging Face's bf16 models do)
  // instead of fp32: the embedding writes it, the o and down projections add to it in place
  // (Matmul accumulate), qkv and gate/up read it as it is, and RoPE + KV store and SiLU·mul
  // scale their rows by 1 / rms of it, which a side stream computes while the qkv or gate/up
  // projection runs, so a layer has no norm on its main path. RTGEN_NORM_FOLD=0: never (A/B).
  bool FoldsNorms(const ForwardShape& shape) const;
  // True when a step of this shape has decode attention copy its older keys before its PDL wait
  // (DecodeAttentionParams::prefetch_kv): a decode step writes only each sequence's newest key,
  // and the qkv launch before attention releases it early (matmul.h MatmulRopeReleasesEarly).
  bool PrefetchesKv(const ForwardShape& shape) const;
  // True when a step of this shape serves its decode rows with decode attention (split keys,
  // tensor cores) and the rest with prefill attention: a step of several sequences that is not
  // decode-only (a mixed step). The step arrays say which rows (StepArrays::decode_context_lens,
  // attention_positions; the CUDA backend's MarkDecodeRows): decode attention runs first, writing
  // its rows and zeros at the other sequences' rows < num_seqs, then prefill attention writes
  // every row but the decode rows (kPrefillKeepRow). RTGEN_MIXED_DECODE=0: prefill attention
  // alone (A/B).
  bool SplitsDecodeRows(const ForwardShape& shape) const;
  // True when a step of this shape runs each layer's qkv projection, RoPE, KV store, attention
  // and o projection as one cluster launch (attention_cluster.h) instead of three kernels: one
  // sequence decoding one token with linked norms, heads of 64, and the shapes and the device
  // fit the kernel. Opt-in (RTGEN_ATTENTION_CLUSTER=1): on the H200 it measured level with the
  // three launches, not faster (SmolLM2-135M b1 0.436-0.449 against 0.432-0.436 ms, session 25).
  bool AttentionInCluster(const ForwardShape& shape, const StepArrays& step,
                          const KvPool& kv) const;
  // AttentionInCluster's conditions on the shape, the switch and the diagnostics alone (not
  // whether the kernel takes this step's parameters).
  bool ClusterWantsShape(const ForwardShape& shape) const;
  // The context bound a decode step of `shape` plans attention for: its class, at most
  // max_context (ForwardShape::context_bound; 0: max_context).
  int32_t ContextBound(const ForwardShape& shape) const;

  absl::Status Run(const ForwardShape& shape, const StepArrays& step, const KvPool& kv,
                   cudaStream_t stream);

  const float* logits() const { return logits_.as<const float>(); }  // [num_samples, vocab]

  // Zeroes, on `stream`, the state that is zero between steps and that one kernel of a step
  // leaves for a later one to consume: the linked norms' sums, the fused MLP's pending products
  // and arrival counter, and the split counters of attention and sampling. For a step that
  // failed partway through queuing (its queued kernels finished): one whose producer ran but
  // whose consumer was never queued leaves a sum the next step would add to. Safe whenever no
  // step is in flight: every sum left then has been read (the final norm's too, which the next
  // step's first FFN-norm consumer would zero).
  absl::Status ResetStepState(cudaStream_t stream);
  // Testing: the next Run that runs the layers one by one returns an error after queuing
  // `layers` of them (a step failing partway through queuing); the layer count: after queuing
  // the whole step, sampler included; negative: none.
  void FailNextRunAfterLayersForTesting(int32_t layers) { fail_after_layers_ = layers; }
  // Whether the last Run got as far as queuing (or trying to queue) its sampler, which writes
  // the chain tokens of its logits rows: a failed Run that did not leaves the earlier step's.
  bool sampler_queued() const { return sampler_queued_; }

  // Whether the linear layers may tune a new shape now (MatmulContext::AllowTuning; off when
  // created): the backend allows it around its graph warm-up runs only.
  void AllowMatmulTuning(bool allow) { matmul_->AllowTuning(allow); }

  // Columns of each block-table row in the StepArrays passed to Run: enough blocks of
  // block_size tokens for max_context tokens (StepBuffers must be created with this width).
  int32_t BlockTableWidth(int32_t block_size) const {
    return (max_context_ + block_size - 1) / block_size;
  }

 private:
  ModelForward() = default;
  absl::Status Layer(int layer, const ForwardShape& shape, const StepArrays& step,
                     const KvPool& kv, cudaStream_t stream);
  // A layer's qkv projection, RoPE, KV store, attention and o projection as separate launches
  // (the norm before them is the caller's).
  absl::Status AttentionHalf(int layer, const ForwardShape& shape, const StepArrays& step,
                             const KvPool& kv, cudaStream_t stream);
  // The cluster launch of layer `layer` (AttentionInCluster), its o projection producing the
  // FFN norm's link; the caller sets the attention norm's consumer side from layer 1 on.
  kernels::AttentionClusterParams ClusterParams(int layer, const StepArrays& step,
                                                const KvPool& kv) const;
  // Layer `layer`'s qkv rows (n tokens in qkv_) and cache slots as RopeKvStore takes them.
  struct QkvRows {
    kernels::RopeParams rope;
    kernels::KvStoreParams store;
  };
  QkvRows QkvRowsOf(int layer, int32_t n, const StepArrays& step, const KvPool& kv) const;
  // Layer `layer`'s qkv projection of n rows: normed_ (the bf16 residual stream in folded steps)
  // times its wqkv, into qkv_.
  kernels::MatmulParams QkvProjection(int layer, int32_t n) const;
  // Layer `layer`'s o projection of n rows: attn_ times its wo, into proj_.
  kernels::MatmulParams OProjection(int layer, int32_t n) const;
  // o_proj reading its input merged from `decode`'s partitions (gemv.h GemvMergedInput).
  kernels::MatmulParams MergingOProjection(kernels::MatmulParams o_proj,
                                           const kernels::DecodeAttentionParams& decode) const;
  // A decode layer with folded norms (FoldsNorms; model_forward_folded.cc).
  absl::Status FoldedLayer(int layer, const ForwardShape& shape, const StepArrays& step,
                           const KvPool& kv, cudaStream_t stream);
  // Runs `proj` (the qkv or gate/up projection, which reads the residual stream) on `stream`
  // and, beside it on the side stream, the folded norm's row scales of the stream's first
  // proj.m rows into norm_scales_ row `which` (0: attention norm, 1: FFN norm); joined after.
  absl::Status ProjectionBesideRowScales(const kernels::MatmulParams& proj, int which,
                                         cudaStream_t stream);
  // Folds the norms into the weights where a decode step of max_seqs rows is a FoldableStep; at
  // creation.
  absl::Status FoldNormsIfUseful();
  // FoldsNorms without the weights' state: a decode step, not linked, its qkv on cuBLASLt, RoPE
  // not in attention.
  bool FoldableStep(const ForwardShape& shape) const;
  // Layer `layer`'s decode attention over the qkv rows (without RoPE and the KV store). With
  // o_may_merge, merged_by_consumer says whether the plan wants the o projection to merge the
  // partitions (the caller then either lets it or clears it); without, attention merges them.
  kernels::DecodeAttentionParams DecodeParams(int layer, const ForwardShape& shape,
                                              const StepArrays& step, const KvPool& kv,
                                              bool o_may_merge = false) const;
  // What decode steps of `rows` sequences plan their attention's partitions from.
  kernels::DecodeShape DecodeShapeFor(int32_t rows) const;
  // True when decode attention should do RoPE and the KV store (DecodeAttentionParams::rope):
  // the qkv projection is not the fused RoPE GEMV, attention runs on tensor cores and does not
  // prefetch, and RTGEN_DECODE_ROPE=1 asks for it.
  bool RopeInAttention(const kernels::MatmulParams& qkv_proj,
                       const kernels::DecodeAttentionParams& decode) const;
  // Layer `layer`'s gate/up, SwiGLU and down projection as one launch (linked norms: the FFN
  // norm's consumer; its down products left pending for the next layer, or joined by the last).
  kernels::FusedMlpParams MlpParams(int layer) const;
  // The qkv projection's link from layer 1 on (the attention norm's consumer; after a fused MLP,
  // `pending`: rebuilding its row from the pending products) and the o projection's (the FFN
  // norm's producer; `pending`: joining the pending products first).
  kernels::GemvNormLink QkvLink(int layer, bool pending) const;
  kernels::GemvNormLink OLink(int layer, bool pending) const;
  // True when this step's layers run their MLP half as one launch (MlpParams): linked norms,
  // the kernels take the shapes and links, and RTGEN_FUSED_MLP=1. Opt-in: on the H200 it
  // measured slower than the two GEMVs in the graph (SmolLM2-135M b1 0.462-0.467 against
  // 0.432-0.439 ms) and faster without PDL (0.556 against 0.602-0.607; docs/perf/gpu_notes.md).
  bool FusesMlp() const;
  // The two sides of linked norm `slot` (LinksNorms): the projection before the norm writes
  // `normed` with the norm's `weight`; the one after it reads the slot and zeroes the one before.
  kernels::GemvNormLink ProducerLink(int32_t slot, const float* weight,
                                     __nv_bfloat16* normed) const;
  kernels::GemvNormLink ConsumerLink(int32_t slot) const;
  // A link that only zeroes `slot` (its consumer has completed): the last projection before a
  // launched norm (gemv.h GemvNormLink::zero_only).
  kernels::GemvNormLink ZeroingLink(int32_t slot) const;
  // Linked norm `slot`'s sums (norm_sums_).
  unsigned long long* NormSlot(int32_t slot) const;
  // True when the LM head at `rows` rows takes a norm link (runs on the GEMV).
  bool LmHeadTakesLink(int32_t rows) const;
  // On-device sampling of the first shape.num_samples logits rows.
  absl::Status Sample(const ForwardShape& shape, const StepArrays& step, cudaStream_t stream);

  ModelConfig config_;
  const DeviceWeights* weights_ = nullptr;
  StepCapacity capacity_;
  int32_t max_context_ = 0;
  int32_t num_sms_ = 0;
  int32_t max_link_rows_ = 1;  // LinksNorms' most rows (set at creation)
  std::unique_ptr<kernels::MatmulContext> matmul_;
  std::unique_ptr<PersistentDecoder> persistent_;  // null: layered path only
  // Activations, sized for capacity_.max_tokens rows (logits: max_seqs rows).
  DeviceBuffer residual_;      // f32 [tokens, hidden]
  DeviceBuffer normed_;        // bf16 [tokens, hidden]; the residual stream in folded steps
  DeviceBuffer qkv_;           // bf16 [tokens, q_dim + 2 * kv_dim]
  DeviceBuffer attn_;          // bf16 [tokens, q_dim]
  DeviceBuffer proj_;          // bf16 [tokens, hidden] (o-proj, then down-proj output)
  DeviceBuffer gate_up_;       // bf16 [tokens, 2 * intermediate]
  DeviceBuffer act_;           // bf16 [tokens, intermediate]
  DeviceBuffer final_normed_;  // bf16 [seqs, hidden]
  DeviceBuffer logits_;        // f32 [seqs, vocab]
  DeviceBuffer split_out_;     // f32 decode attention partials
  DeviceBuffer split_ml_;      // f32 decode attention partial (max, sum)
  DeviceBuffer split_counters_;  // i32 decode attention merge counters (zero between launches)
  DeviceBuffer sample_states_;    // split greedy sampling states (kernels/sampling.h)
  DeviceBuffer sample_counters_;  // i32 split greedy sampling counters (zero between launches)
  DeviceBuffer sample_top_;       // split greedy rows' top-n key lists (kernels/sampling.h)
  // i32 [max_seqs]: every step's sampled tokens by logits row, at fixed addresses; a pending
  // token -1 - r of the next step's input is read from row r here (pipelined steps).
  DeviceBuffer chain_tokens_;
  // i32 [max_tokens]: this step's input ids as its embedding read them (pending ones resolved),
  // for the sampler's penalties (SampleRowParams::penalty_pending).
  DeviceBuffer resolved_tokens_;
  // u64 [2 * layers]: the linked norms' fixed-point sums of squares (zero between uses).
  DeviceBuffer norm_sums_;
  bool split_decode_rows_ = false;  // this step's decode rows go to decode attention (set by Run)
  bool link_norms_ = false;       // this step links its norms (set by Run)
  bool link_final_norm_ = false;  // and its final norm (set by Run)
  bool fold_norms_ = false;  // the weights' norms are folded (set at creation)
  bool fold_step_ = false;   // this step folds its norms (set by Run)
  bool prefetch_kv_ = false;  // this step's decode attention prefetches (set by Run)
  bool attention_cluster_ = false;  // this step's layers attend in a cluster (set by Run)
  bool fused_mlp_ = false;  // this step's layers run MlpParams launches (set by Run)
  // The fused MLP's pending down products (i64 [hidden], gemv.h kPendingScale units) and its
  // last layer's arrival counter (u32): zero between uses.
  DeviceBuffer mlp_pending_;
  DeviceBuffer mlp_arrivals_;
  int32_t fail_after_layers_ = -1;  // FailNextRunAfterLayersForTesting (one run)
  bool sampler_queued_ = false;     // sampler_queued()
  // With folded norms: f32 [2, tokens], the attention and FFN norms' row scales, and the stream
  // that computes them beside the projections.
  DeviceBuffer norm_scales_;
  std::unique_ptr<kernels::SideStream> side_;
};

}  // namespace rtgen
