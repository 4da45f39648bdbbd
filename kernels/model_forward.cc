#include "kernels/model_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/decode_attention_mma.h"
#include "kernels/diag_skip.h"
#include "kernels/embedding.h"
#include "kernels/env_switch.h"
#include "kernels/gemv.h"
#include "kernels/kv_store.h"
#include "kernels/prefill_attention.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"

namespace rtgen {
namespace {

bool SeparateDecodeCombine() {
  static const bool separate = kernels::EnvChoice("RTGEN_DECODE_COMBINE", {"kernel"}) == 0;
  return separate;
}

// Decode attention on tensor cores where it applies (RTGEN_DECODE_MMA=0: CUDA cores, for A/B).
bool DecodeTensorCores() {
  static const bool on = kernels::EnvOnUnlessZero("RTGEN_DECODE_MMA");
  return on;
}

// Prefill attention on tensor cores past kPrefillCudaCoreTokens tokens a step: at fewer, the
// CUDA-core kernel's block per (token, head) finishes sooner than the tensor-core kernel's block
// per 64 tokens of a head, whose copies and merges do not shrink with the tokens. Measured on the
// H200 (session 41, TTFT ms at batch 1, prefill graphs, two rounds, tensor cores against CUDA
// cores): SmolLM2-135M prompt 8 0.68-0.69 vs 0.55, 16 0.68-0.69 vs 0.62, 24 1.15-1.16 vs 1.13,
// 32 1.15-1.16 vs 1.19, 64 1.18-1.19 vs 1.47-1.48; Llama-3.2-1B 16 1.16 vs 1.12-1.13, 24
// 1.21-1.22 vs 1.20-1.22, 32 1.21-1.22 vs 1.25-1.26; Llama-3-8B 16 4.86 vs 4.72, 32 4.95 vs 4.99.
// RTGEN_PREFILL_MMA=0: the CUDA-core kernel at every size; =1: tensor cores at every size (A/B).
constexpr int32_t kPrefillCudaCoreTokens = 16;
bool PrefillTensorCores(int32_t num_tokens) {
  static const int forced = kernels::EnvChoice("RTGEN_PREFILL_MMA", {"0", "1"});
  return forced >= 0 ? forced == 1 : num_tokens > kPrefillCudaCoreTokens;
}

// Decode attention copies its first K/V tiles before its PDL wait where the qkv launch before it
// releases it early (RTGEN_DECODE_PREFETCH=0: never, for A/B). Measured on the H200 (session 14,
// graph TPOT ms, three alternating rounds, prefetch on everywhere vs off): Llama-3-8B b1 (qkv on
// the row-streaming GEMV, which releases attention before its main loop) 4.00-4.02 vs 4.07;
// SmolLM2-135M b1 (the tensor-core GEMV releases it after its main loop) 0.523-0.526 vs 0.495,
// Llama-3.2-1B b1 0.862-0.869 vs 0.855-0.858; at batch 64 within noise (8B 5.33 vs 5.35) or
// worse (SmolLM2 1.04-1.06 vs 1.01-1.04). Since session 38 the tensor-core GEMV releases it
// early at head_dim 64 with large weights (gemv.cu TcRopeReleasesEarly: 1B b1 0.83 -> 0.80 ms,
// with 16-warp attention blocks that copy a whole 256-key tile per stage).
// RTGEN_DECODE_PREFETCH=all: at every decode step, whichever kernel writes the newest key (A/B;
// the rule it needs, launch.h, holds for every kernel of the step; session 18: SmolLM2 b1 0.453
// -> 0.474).
enum class Prefetch { kNever, kWhereReleasedEarly, kAlways };
Prefetch DecodePrefetch() {
  static const Prefetch mode = [] {
    switch (kernels::EnvChoice("RTGEN_DECODE_PREFETCH", {"0", "1", "all"}, 1)) {
      case 0: return Prefetch::kNever;
      case 2: return Prefetch::kAlways;
      default: return Prefetch::kWhereReleasedEarly;
    }
  }();
  return mode;
}

// RTGEN_DECODE_ROPE=1: decode attention does RoPE and the KV store where the qkv projection is
// not the fused RoPE GEMV, one launch fewer per layer (opt-in). Measured on the H200 (session 18,
// graph TPOT ms, two calls, the default first): Llama-3-8B b8 4.57 -> 4.45-4.49, Llama-3.2-1B b8
// 0.966 -> 0.946-0.953, but SmolLM2-135M b8 0.552 -> 0.567-0.570 and Llama-3-8B b64 5.18-5.23 ->
// 5.22-5.42; batch 1 takes the fused GEMV either way.
bool DecodeRope() {
  static const bool on = kernels::EnvOptIn("RTGEN_DECODE_ROPE");
  return on;
}

// Smallest decode attention partition, in keys (RTGEN_DECODE_MIN_PARTITION, for A/B).
int32_t DecodeMinPartition() {
  static const int32_t keys = [] {
    return static_cast<int32_t>(kernels::EnvIntIn("RTGEN_DECODE_MIN_PARTITION", 1, INT32_MAX,
                                                  kernels::kDefaultMinPartition));
  }();
  return keys;
}

// RTGEN_NORM_LINK, as LinkRows and LinksNorms read it: 0 never links; 1 links one row only; 2
// ("final") only where the final norm links too (session 30's rule); -1 (unset or unknown) the
// default rule. Read when called (LinksNorms keeps it in a static).
enum NormLinkSwitch { kNormLinkNever = 0, kNormLinkOneRow = 1, kNormLinkFinal = 2 };
int NormLinkChoice() { return kernels::EnvChoice("RTGEN_NORM_LINK", {"0", "1", "final"}); }

// The most rows a decode step links its norms at (ModelForward::LinksNorms): `wanted` (the
// backend's option, 16 by default: measured), or RTGEN_NORM_LINK_ROWS=N (A/B), at most the
// kernels' kGemvMaxLinkRows (16); RTGEN_NORM_LINK=1: one.
int32_t LinkRows(int32_t wanted) {
  if (NormLinkChoice() == kNormLinkOneRow) return 1;
  const long long rows =
      kernels::EnvIntIn("RTGEN_NORM_LINK_ROWS", 1, kernels::kGemvMaxLinkRows, wanted);
  return static_cast<int32_t>(std::clamp<long long>(rows, 1, kernels::kGemvMaxLinkRows));
}

template <typename T>
T* At(const DeviceBuffer& b, int64_t offset = 0) {
  return b.as<T>() + offset;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelForward>> ModelForward::Create(
    const ModelConfig& config, const DeviceWeights* weights, const StepCapacity& capacity,
    int32_t max_context, int32_t num_sms, bool use_gemv, bool persistent_decode,
    int32_t max_link_rows) {
  std::unique_ptr<ModelForward> f(new ModelForward());
  f->config_ = config;
  f->weights_ = weights;
  f->capacity_ = capacity;
  f->max_context_ = max_context;
  f->num_sms_ = num_sms;
  f->max_link_rows_ = LinkRows(max_link_rows);
  ASSIGN_OR_RETURN(f->matmul_, kernels::MatmulContext::Create(use_gemv));
  const size_t t = capacity.max_tokens, s = capacity.max_seqs;
  const size_t h = config.hidden_size, q = size_t{1} * config.num_heads * config.head_dim;
  const size_t kv = size_t{1} * config.num_kv_heads * config.head_dim;
  const size_t inter = config.intermediate_size, bf = sizeof(__nv_bfloat16);
  ASSIGN_OR_RETURN(f->residual_, DeviceBuffer::Allocate(t * h * sizeof(float)));
  ASSIGN_OR_RETURN(f->normed_, DeviceBuffer::Allocate(t * h * bf));
  ASSIGN_OR_RETURN(f->qkv_, DeviceBuffer::Allocate(t * (q + 2 * kv) * bf));
  ASSIGN_OR_RETURN(f->attn_, DeviceBuffer::Allocate(t * q * bf));
  ASSIGN_OR_RETURN(f->proj_, DeviceBuffer::Allocate(t * h * bf));
  ASSIGN_OR_RETURN(f->gate_up_, DeviceBuffer::Allocate(t * 2 * inter * bf));
  ASSIGN_OR_RETURN(f->act_, DeviceBuffer::Allocate(t * inter * bf));
  ASSIGN_OR_RETURN(f->final_normed_, DeviceBuffer::Allocate(s * h * bf));
  ASSIGN_OR_RETURN(f->logits_, DeviceBuffer::Allocate(s * config.vocab_size * sizeof(float)));
  // Decode attention's partials: for the largest plan any step can take, at every batch size
  // up to max_seqs and every context class, whoever merges them (DecodeParams plans steps the o
  // projection cannot merge with MergeInO::kNever: their partitions may be more).
  size_t parts = 1;
  for (int32_t n = 1; n <= capacity.max_seqs; ++n) {
    kernels::DecodeShape never = f->DecodeShapeFor(n);
    never.merge = kernels::MergeInO::kNever;
    for (const kernels::DecodeShape& shape : {f->DecodeShapeFor(n), never}) {
      for (const int32_t bound : kernels::DecodeStepContextBounds(shape, max_context)) {
        const kernels::DecodeStepPlan plan = kernels::PlanDecodeStep(shape, bound);
        parts = std::max(parts, size_t{1} * n * config.num_heads * plan.split.num_splits);
      }
    }
  }
  ASSIGN_OR_RETURN(f->split_out_,
                   DeviceBuffer::Allocate(parts * config.head_dim * sizeof(float)));
  ASSIGN_OR_RETURN(f->split_ml_, DeviceBuffer::Allocate(parts * 2 * sizeof(float)));
  const size_t counters = s * config.num_heads * sizeof(int32_t);
  ASSIGN_OR_RETURN(f->split_counters_, DeviceBuffer::Allocate(counters));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->split_counters_.get(), 0, counters));
  ASSIGN_OR_RETURN(f->sample_states_, DeviceBuffer::Allocate(s * kernels::kMaxSampleSplits *
                                                              kernels::kSampleSplitStateBytes));
  ASSIGN_OR_RETURN(f->sample_top_, DeviceBuffer::Allocate(s * kernels::kMaxSampleSplits *
                                                           kernels::kMaxTopLogprobs *
                                                           sizeof(uint64_t)));
  ASSIGN_OR_RETURN(f->sample_counters_, DeviceBuffer::Allocate(s * sizeof(int32_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->sample_counters_.get(), 0, s * sizeof(int32_t)));
  const size_t sums =
      size_t{2} * config.num_layers * kernels::kNormSlotSize * sizeof(unsigned long long);
  ASSIGN_OR_RETURN(f->norm_sums_, DeviceBuffer::Allocate(sums));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->norm_sums_.get(), 0, sums));
  ASSIGN_OR_RETURN(f->mlp_pending_, DeviceBuffer::Allocate(h * sizeof(long long)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->mlp_pending_.get(), 0, h * sizeof(long long)));
  ASSIGN_OR_RETURN(f->mlp_arrivals_, DeviceBuffer::Allocate(sizeof(unsigned int)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->mlp_arrivals_.get(), 0, sizeof(unsigned int)));
  ASSIGN_OR_RETURN(f->chain_tokens_, DeviceBuffer::Allocate(s * sizeof(int32_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(f->chain_tokens_.get(), 0, s * sizeof(int32_t)));
  ASSIGN_OR_RETURN(f->resolved_tokens_, DeviceBuffer::Allocate(t * sizeof(int32_t)));
  // The zeroing above ran on the legacy default stream, which the backend's non-blocking stream
  // does not wait for: done before any kernel reads those counters and sums.
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  RETURN_IF_ERROR(f->FoldNormsIfUseful());  // before anything else reads the weights
  if (PersistentDecodeWanted(persistent_decode)) {
    ASSIGN_OR_RETURN(f->persistent_, PersistentDecoder::CreateIfSupported(config, *weights));
  }
  return f;
}

kernels::MatmulParams ModelForward::QkvProjection(int layer, int32_t n) const {
  const ModelConfig& c = config_;
  const int32_t qkv_dim = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return {At<__nv_bfloat16>(normed_), weights_->layers[layer].wqkv.as<__nv_bfloat16>(),
          At<__nv_bfloat16>(qkv_), false, n, qkv_dim, c.hidden_size};
}

kernels::MatmulParams ModelForward::OProjection(int layer, int32_t n) const {
  const ModelConfig& c = config_;
  return {At<__nv_bfloat16>(attn_), weights_->layers[layer].wo.as<__nv_bfloat16>(),
          At<__nv_bfloat16>(proj_), false, n, c.hidden_size, c.num_heads * c.head_dim};
}

ModelForward::QkvRows ModelForward::QkvRowsOf(int layer, int32_t n, const StepArrays& step,
                                              const KvPool& kv) const {
  const ModelConfig& c = config_;
  const int32_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const int32_t qkv_dim = q_dim + 2 * kv_dim;
  __nv_bfloat16* qkv = At<__nv_bfloat16>(qkv_);
  QkvRows r;
  r.rope = {qkv, qkv + q_dim, qkv_dim, step.positions, weights_->inv_freq.as<float>(),
            n,   c.num_heads, c.num_kv_heads, c.head_dim};
  r.store = {qkv + q_dim,
             qkv + q_dim + kv_dim,
             qkv_dim,
             At<__nv_bfloat16>(kv.k, layer * kv.layer_elems),
             At<__nv_bfloat16>(kv.v, layer * kv.layer_elems),
             step.slot_mapping,
             n,
             kv_dim};
  return r;
}

absl::Status ModelForward::Layer(int layer, const ForwardShape& shape, const StepArrays& step,
                                 const KvPool& kv, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const DeviceLayer& w = weights_->layers[layer];
  const int32_t n = shape.num_tokens, h = c.hidden_size, inter = c.intermediate_size;

  // The previous layer's down-proj output joins the residual here (none before layer 0); with
  // linked norms the down projection has done that and written normed_ (norm slot 2 * layer - 1),
  // or, with fused MLPs, left its products pending for the qkv and o projections (QkvLink, OLink).
  const bool linked_attn_norm = link_norms_ && layer > 0;
  kernels::RmsNormParams norm{At<float>(residual_), layer > 0 ? At<__nv_bfloat16>(proj_) : nullptr,
                              nullptr, w.attn_norm.as<float>(), At<__nv_bfloat16>(normed_), n, h,
                              c.rms_norm_eps};
  if (!linked_attn_norm && !kernels::DiagSkips(kernels::StepPart::kAttnNorm)) {
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RmsNorm(norm, stream));
  }
  if (attention_cluster_) {  // qkv, RoPE, the KV store, attention and o in one launch
    kernels::AttentionClusterParams a = ClusterParams(layer, step, kv);
    if (linked_attn_norm) a.consumer = ConsumerLink(2 * layer - 1);
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::AttentionCluster(a, stream));
  } else {
    RETURN_IF_ERROR(AttentionHalf(layer, shape, step, kv, stream));
  }
  norm = {At<float>(residual_), At<__nv_bfloat16>(proj_), nullptr, w.ffn_norm.as<float>(),
          At<__nv_bfloat16>(normed_), n, h, c.rms_norm_eps};
  if (!link_norms_ && !kernels::DiagSkips(kernels::StepPart::kFfnNorm)) {
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RmsNorm(norm, stream));
  }
  if (fused_mlp_) {  // gate_up, SiLU·mul and down in one launch
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::FusedMlp(MlpParams(layer), stream));
    return absl::OkStatus();
  }
  // gate_up and SiLU·mul: one fused GEMV launch at decode batch sizes (matmul.h).
  if (!kernels::DiagSkips(kernels::StepPart::kGateUp)) {
    kernels::MatmulParams gate_up{At<__nv_bfloat16>(normed_), w.w_gate_up.as<__nv_bfloat16>(),
                                  At<__nv_bfloat16>(gate_up_), false, n, 2 * inter, h};
    if (link_norms_) gate_up.link = ConsumerLink(2 * layer);
    RETURN_IF_ERROR(kernels::MatmulSiluMul(*matmul_, gate_up, At<__nv_bfloat16>(act_), stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kDown)) {
    kernels::MatmulParams down{At<__nv_bfloat16>(act_), w.w_down.as<__nv_bfloat16>(),
                               At<__nv_bfloat16>(proj_), false, n, h, inter};
    const bool last = layer + 1 == c.num_layers;
    if (link_norms_ && (!last || link_final_norm_)) {  // the next attention norm, or the final
      const DeviceBuffer& next_norm =
          last ? weights_->final_norm : weights_->layers[layer + 1].attn_norm;
      down.link = ProducerLink(2 * layer + 1, next_norm.as<float>(),
                               At<__nv_bfloat16>(last ? final_normed_ : normed_));
    } else if (link_norms_) {  // the final norm is launched: only the last FFN norm's zeroing
      down.link = ZeroingLink(2 * layer);
    }
    RETURN_IF_ERROR(kernels::Matmul(*matmul_, down, stream));
  }
  return absl::OkStatus();
}

absl::Status ModelForward::AttentionHalf(int layer, const ForwardShape& shape,
                                         const StepArrays& step, const KvPool& kv,
                                         cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t n = shape.num_tokens, hd = c.head_dim;
  const int32_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const int32_t qkv_dim = q_dim + 2 * kv_dim;
  __nv_bfloat16* qkv = At<__nv_bfloat16>(qkv_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Row stride of step.block_tables (capacity_.max_blocks_per_seq is 0: the pool's block size
  // is not known when ModelForward is created).
  const int32_t table_width = BlockTableWidth(kv.block_size);
  const bool linked_attn_norm = link_norms_ && layer > 0;
  // qkv projection, RoPE and the KV store (one fused launch at decode batch sizes, matmul.h).
  const auto [rope, store] = QkvRowsOf(layer, n, step, kv);
  kernels::MatmulParams qkv_proj = QkvProjection(layer, n);
  const bool attention = !kernels::DiagSkips(kernels::StepPart::kAttention);
  kernels::DecodeAttentionParams decode;
  if (shape.decode_only) decode = DecodeParams(layer, shape, step, kv, /*o_may_merge=*/true);
  // Where the qkv projection is not the fused RoPE GEMV, decode attention does RoPE and the KV
  // store itself (one launch fewer per layer).
  if (attention && shape.decode_only && RopeInAttention(qkv_proj, decode)) {
    decode.rope = {store.k,      store.v,   step.positions, weights_->inv_freq.as<float>(),
                   step.slot_mapping, store.k_cache, store.v_cache};
  }
  if (!kernels::DiagSkips(kernels::StepPart::kQkv)) {
    if (linked_attn_norm) qkv_proj.link = QkvLink(layer, fused_mlp_);
    if (decode.rope.on()) {
      RETURN_IF_ERROR(kernels::Matmul(*matmul_, qkv_proj, stream));
    } else {
      RETURN_IF_ERROR(kernels::MatmulRopeKvStore(*matmul_, qkv_proj, rope, store, stream));
    }
  }
  kernels::MatmulParams o_proj = OProjection(layer, n);
  if (link_norms_) o_proj.link = OLink(layer, fused_mlp_);
  // The plan's partitions merged by the o projection as it reads them (decode_plan.h), where its
  // GEMV takes them; attention merges them otherwise.
  if (attention && shape.decode_only && decode.merged_by_consumer) {
    const kernels::MatmulParams merging = MergingOProjection(o_proj, decode);
    decode.merged_by_consumer = kernels::MatmulTakesMergedInput(*matmul_, merging);
    if (decode.merged_by_consumer) {
      o_proj = merging;
      decode.counters = nullptr;
    }
  }
  if (attention && shape.decode_only) {
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::DecodeAttention(decode, stream));
  } else if (attention) {
    if (split_decode_rows_) {  // first: it writes zeros at the rows prefill attention serves
      kernels::DecodeAttentionParams rows =
          DecodeParams(layer, ForwardShape::Decode(shape.num_seqs), step, kv);
      rows.context_lens = step.decode_context_lens;
      rows.prefetch_kv = false;  // every key read after its wait (prefetch is for decode steps)
      RTGEN_CUDA_RETURN_IF_ERROR(kernels::DecodeAttention(rows, stream));
    }
    kernels::PrefillAttentionParams a;
    a.q = qkv;
    a.q_stride = qkv_dim;
    a.k_cache = store.k_cache;
    a.v_cache = store.v_cache;
    a.token_seq = step.token_seq;
    a.positions = split_decode_rows_ ? step.attention_positions : step.positions;
    a.block_tables = step.block_tables;
    a.context_lens = step.context_lens;
    a.out = At<__nv_bfloat16>(attn_);
    a.num_tokens = n;
    a.num_heads = c.num_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = hd;
    a.block_size = kv.block_size;
    a.max_blocks_per_seq = table_width;
    a.scale = scale;
    a.num_seqs = shape.num_seqs;
    a.tensor_cores = PrefillTensorCores(n);
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::PrefillAttention(a, stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kO)) {
    RETURN_IF_ERROR(kernels::Matmul(*matmul_, o_proj, stream));
  }
  return absl::OkStatus();
}

kernels::AttentionClusterParams ModelForward::ClusterParams(int layer, const StepArrays& step,
                                                            const KvPool& kv) const {
  const ModelConfig& c = config_;
  const DeviceLayer& w = weights_->layers[layer];
  kernels::AttentionClusterParams a;
  a.x = At<__nv_bfloat16>(normed_);
  a.wqkv = w.wqkv.as<__nv_bfloat16>();
  a.wo = w.wo.as<__nv_bfloat16>();
  a.producer = ProducerLink(2 * layer, w.ffn_norm.as<float>(), At<__nv_bfloat16>(normed_));
  a.positions = step.positions;
  a.inv_freq = weights_->inv_freq.as<float>();
  a.slot_mapping = step.slot_mapping;
  a.k_cache = At<__nv_bfloat16>(kv.k, layer * kv.layer_elems);
  a.v_cache = At<__nv_bfloat16>(kv.v, layer * kv.layer_elems);
  a.block_tables = step.block_tables;
  a.context_lens = step.context_lens;
  a.hidden = c.hidden_size;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.block_size = kv.block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return a;
}

bool ModelForward::ClusterWantsShape(const ForwardShape& shape) const {
  static const bool enabled = kernels::EnvOptIn("RTGEN_ATTENTION_CLUSTER");
  if (!enabled || !shape.decode_only || shape.num_seqs != 1 || shape.num_tokens != 1 ||
      !LinksNorms(shape) || config_.head_dim != kernels::kAttentionClusterHeadDim) {
    return false;
  }
  for (const kernels::StepPart part :
       {kernels::StepPart::kQkv, kernels::StepPart::kAttention, kernels::StepPart::kO}) {
    if (kernels::DiagSkips(part)) return false;
  }
  return true;
}

bool ModelForward::AttentionInCluster(const ForwardShape& shape, const StepArrays& step,
                                      const KvPool& kv) const {
  return ClusterWantsShape(shape) &&
         kernels::AttentionClusterSupported(ClusterParams(0, step, kv));
}

int32_t ModelForward::ContextBound(const ForwardShape& shape) const {
  return shape.context_bound > 0 ? std::min(shape.context_bound, max_context_) : max_context_;
}

absl::Status ModelForward::ResetStepState(cudaStream_t stream) {
  for (const DeviceBuffer* b : {&norm_sums_, &mlp_pending_, &mlp_arrivals_, &split_counters_,
                                &sample_counters_}) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b->get(), 0, b->bytes(), stream));
  }
  return absl::OkStatus();
}

absl::Status ModelForward::Run(const ForwardShape& shape, const StepArrays& step,
                               const KvPool& kv, cudaStream_t stream) {
  sampler_queued_ = false;
  const ModelConfig& c = config_;
  if (shape.num_tokens <= 0 || shape.num_tokens > capacity_.max_tokens ||
      shape.num_seqs > capacity_.max_seqs || shape.num_samples > capacity_.max_seqs) {
    return absl::InvalidArgumentError("step shape exceeds the CUDA backend's capacity");
  }
  if (kv.block_size <= 0) return absl::FailedPreconditionError("the KV pool is not allocated");
  // One sequence decoding one token: the whole step (layers, final norm, LM head) as one
  // persistent kernel. Its logits row is row 0, which is what sample_rows holds for this step.
  const bool persistent_step = persistent_ && shape.decode_only && shape.num_seqs == 1 &&
                               shape.num_tokens == 1 && shape.num_samples <= 1;
  link_norms_ = LinksNorms(shape);
  link_final_norm_ = link_norms_ && LmHeadTakesLink(shape.num_tokens);  // LinksFinalNorm
  fold_step_ = !persistent_step && FoldsNorms(shape);
  kernels::EmbeddingParams embed{weights_->embedding.as<__nv_bfloat16>(), step.token_ids,
                                 At<float>(residual_), shape.num_tokens, c.hidden_size,
                                 c.vocab_size, At<int32_t>(chain_tokens_)};
  if (fold_step_) embed.out16 = At<__nv_bfloat16>(normed_);  // the bf16 residual stream
  embed.resolved_ids = At<int32_t>(resolved_tokens_);
  embed.plain_launch = shape.staged_inputs;
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::Embedding(embed, stream));
  if (persistent_step) {
    const PersistentActivations acts{At<float>(residual_), At<float>(logits_)};
    RETURN_IF_ERROR(persistent_->Run(step, kv, acts, stream));
    sampler_queued_ = shape.sample && shape.num_samples == 1;
    return sampler_queued_ ? Sample(shape, step, stream) : absl::OkStatus();
  }
  prefetch_kv_ = PrefetchesKv(shape);
  split_decode_rows_ = SplitsDecodeRows(shape);
  attention_cluster_ = AttentionInCluster(shape, step, kv);
  fused_mlp_ = link_final_norm_ && shape.num_tokens == 1 && !attention_cluster_ && FusesMlp();
  const int32_t fail_after = std::exchange(fail_after_layers_, -1);
  for (int layer = 0; layer < c.num_layers; ++layer) {
    if (layer == fail_after) {
      return absl::InternalError(absl::StrCat("injected failure after ", layer,
                                              " layers (FailNextRunAfterLayersForTesting)"));
    }
    RETURN_IF_ERROR(fold_step_ ? FoldedLayer(layer, shape, step, kv, stream)
                               : Layer(layer, shape, step, kv, stream));
  }
  if (shape.num_samples == 0) return absl::OkStatus();
  kernels::RmsNormParams norm{At<float>(residual_), At<__nv_bfloat16>(proj_), step.sample_rows,
                              weights_->final_norm.as<float>(), At<__nv_bfloat16>(final_normed_),
                              shape.num_samples, c.hidden_size, c.rms_norm_eps};
  if (fold_step_) {  // the last down projection has added to the bf16 residual already
    norm.residual = nullptr;
    norm.add = nullptr;
    norm.residual16 = At<__nv_bfloat16>(normed_);
  }
  if (!kernels::DiagSkips(kernels::StepPart::kLmHead)) {
    if (!link_final_norm_) RTGEN_CUDA_RETURN_IF_ERROR(kernels::RmsNorm(norm, stream));
    kernels::MatmulParams lm_head{At<__nv_bfloat16>(final_normed_), weights_->output_matrix(),
                                  At<float>(logits_), true, shape.num_samples, c.vocab_size,
                                  c.hidden_size};
    if (link_final_norm_) lm_head.link = ConsumerLink(2 * c.num_layers - 1);
    RETURN_IF_ERROR(kernels::Matmul(*matmul_, lm_head, stream));
  }
  sampler_queued_ = shape.sample;
  if (shape.sample) RETURN_IF_ERROR(Sample(shape, step, stream));
  if (fail_after == c.num_layers) {
    return absl::InternalError(
        "injected failure after the whole step (FailNextRunAfterLayersForTesting)");
  }
  return absl::OkStatus();
}

bool ModelForward::LinksNorms(const ForwardShape& shape) const {
  static const int choice = NormLinkChoice();
  static const bool enabled = choice != kNormLinkNever;
  static const bool with_final = choice == kNormLinkFinal;
  const int32_t m = shape.num_tokens;
  if (!enabled || m < 1 || m > max_link_rows_ ||
      shape.num_samples != m || (m > 1 && (!shape.decode_only || !shape.samples_in_token_order))) {
    return false;
  }
  const ModelConfig& c = config_;
  const int32_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int32_t qkv_dim = q_dim + 2 * c.num_kv_heads * c.head_dim;
  const int32_t inter = c.intermediate_size;
  const DeviceLayer& w = weights_->layers[0];  // every layer has the same shapes
  // Several rows: only where each layer weight (the LM head aside) is under the size the
  // row-streaming kernel takes at one row. Measured on the H200 (session 30, graph TPOT ms, 128
  // steps, two rounds, one row linked against every row): SmolLM2-135M (weights <= 3.5 MB) b2
  // 0.476-0.481 -> 0.430-0.439, b4 0.483-0.489 -> 0.437-0.442; Llama-3.2-1B b2 0.899-0.915 ->
  // 0.935-0.956, b4 0.923-0.936 -> 0.954-0.961, its 64 MB gate/up GEMV the part that lost
  // (without it, linked steps were 0.014 ms the faster; why is not known).
  const auto takes = [&](const DeviceBuffer& weight, int32_t n, int32_t k, bool f32) {
    const bool small = int64_t{n} * k * 2 < kernels::GemvRowsMinBytes();
    return (m == 1 || small) &&
           kernels::MatmulTakesNormLink(
               *matmul_, {nullptr, weight.as<__nv_bfloat16>(), nullptr, f32, m, n, k});
  };
  return takes(w.wqkv, qkv_dim, h, false) && takes(w.wo, h, q_dim, false) &&
         takes(w.w_gate_up, 2 * inter, h, false) && takes(w.w_down, h, inter, false) &&
         (!with_final || LmHeadTakesLink(m));
}

bool ModelForward::LinksFinalNorm(const ForwardShape& shape) const {
  return LinksNorms(shape) && LmHeadTakesLink(shape.num_tokens);
}

bool ModelForward::LmHeadTakesLink(int32_t rows) const {
  const ModelConfig& c = config_;
  return kernels::MatmulTakesNormLink(
      *matmul_, {nullptr, weights_->output_matrix(), nullptr, true, rows, c.vocab_size,
                 c.hidden_size});
}

// Context classes for decode steps of at most kContextClassRows sequences; larger ones keep one
// class, max_context. Measured on the H200 (session 29, graph TPOT ms, 128 steps at contexts
// 129-256, two rounds, classes against one class): SmolLM2-135M b1 0.437 / 0.438 against 0.447 /
// 0.445, b2 0.479 / 0.483 against 0.491 / 0.488, b4 0.488 / 0.492 against 0.528 / 0.531, but b8
// 0.551 / 0.554 against 0.535 / 0.532; Llama-3.2-1B b1 0.824 against 0.842, b8 0.964 against
// 0.968; Llama-3-8B b1 3.930 against 3.934. RTGEN_DECODE_CONTEXT_CLASSES=0: one class at every
// batch size, =all: classes at every batch size (A/B).
constexpr int32_t kContextClassRows = 4;
std::vector<int32_t> ModelForward::DecodeContextBounds(int32_t rows) const {
  static const int choice =
      kernels::EnvChoice("RTGEN_DECODE_CONTEXT_CLASSES", {"0", "1", "all"}, 1);
  const bool off = choice == 0, all = choice == 2;
  // The persistent kernel (batch 1) plans no key partitions: one class.
  if (off || (!all && rows > kContextClassRows) || (rows == 1 && persistent_decode())) {
    return {max_context_};
  }
  return kernels::DecodeStepContextBounds(DecodeShapeFor(rows), max_context_);
}

kernels::DecodeShape ModelForward::DecodeShapeFor(int32_t rows) const {
  kernels::DecodeShape shape;
  shape.num_seqs = rows;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.o_input = config_.num_heads * config_.head_dim;
  shape.num_sms = num_sms_;
  shape.min_partition = DecodeMinPartition();
  // Only the GEMV merges partitions as it reads them (matmul.h MatmulTakesMergedInput).
  static const kernels::MergeInO merge = kernels::MergeInOFromEnv();
  shape.merge = matmul_->use_gemv() ? merge : kernels::MergeInO::kNever;
  return shape;
}

kernels::DecodeAttentionParams ModelForward::DecodeParams(int layer, const ForwardShape& shape,
                                                         const StepArrays& step, const KvPool& kv,
                                                         bool o_may_merge) const {
  const ModelConfig& c = config_;
  const int32_t hd = c.head_dim;
  kernels::DecodeShape decode_shape = DecodeShapeFor(shape.num_seqs);
  if (!o_may_merge) decode_shape.merge = kernels::MergeInO::kNever;
  const kernels::DecodeStepPlan plan = kernels::PlanDecodeStep(decode_shape, ContextBound(shape));
  kernels::DecodeAttentionParams a;
  a.q = At<__nv_bfloat16>(qkv_);
  a.q_stride = (c.num_heads + 2 * c.num_kv_heads) * hd;
  a.k_cache = At<__nv_bfloat16>(kv.k, layer * kv.layer_elems);
  a.v_cache = At<__nv_bfloat16>(kv.v, layer * kv.layer_elems);
  a.block_tables = step.block_tables;
  a.context_lens = step.context_lens;
  a.out = At<__nv_bfloat16>(attn_);
  a.num_seqs = shape.num_seqs;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = hd;
  a.block_size = kv.block_size;
  // Row stride of step.block_tables (capacity_.max_blocks_per_seq is 0: the pool's block size
  // is not known when ModelForward is created).
  a.max_blocks_per_seq = BlockTableWidth(kv.block_size);
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.num_splits = plan.split.num_splits;
  a.partition_size = plan.split.partition_size;
  a.merged_by_consumer = plan.merged_in_o;  // AttentionHalf settles it (or clears it)
  a.partial_out = At<float>(split_out_);
  a.partial_ml = At<float>(split_ml_);
  // Partitions merged inside the attention kernel (RTGEN_DECODE_COMBINE=kernel: a separate
  // combine launch, for A/B).
  if (!SeparateDecodeCombine()) a.counters = At<int32_t>(split_counters_);
  a.tensor_cores = DecodeTensorCores();
  a.prefetch_kv = prefetch_kv_;
  return a;
}

kernels::MatmulParams ModelForward::MergingOProjection(
    kernels::MatmulParams o_proj, const kernels::DecodeAttentionParams& decode) const {
  o_proj.merged = {decode.partial_out,    decode.partial_ml, decode.context_lens,
                   decode.num_splits,     decode.partition_size, config_.num_heads,
                   config_.head_dim};
  return o_proj;
}

bool ModelForward::MergesInO(const ForwardShape& shape) const {
  // Steps without the layered attention half's decode launch: the persistent kernel, the
  // attention cluster (an opt-in switch; a step whose cluster launch the kernel then refuses is
  // reported as not merging), folded norms.
  if (!shape.decode_only || (persistent_decode() && shape.num_seqs == 1) || FoldsNorms(shape) ||
      ClusterWantsShape(shape)) {
    return false;
  }
  const kernels::DecodeStepPlan plan =
      kernels::PlanDecodeStep(DecodeShapeFor(shape.num_seqs), ContextBound(shape));
  if (!plan.merged_in_o) return false;
  kernels::DecodeAttentionParams decode;  // the fields the merge reads: any non-null buffers
  decode.partial_out = At<float>(split_out_);
  decode.partial_ml = At<float>(split_ml_);
  decode.context_lens = At<int32_t>(split_counters_);
  decode.num_splits = plan.split.num_splits;
  decode.partition_size = plan.split.partition_size;
  kernels::MatmulParams o_proj = OProjection(0, shape.num_tokens);
  if (LinksNorms(shape)) o_proj.link = OLink(0, /*pending=*/false);
  return kernels::MatmulTakesMergedInput(*matmul_, MergingOProjection(o_proj, decode));
}

bool ModelForward::FoldsNorms(const ForwardShape& shape) const {
  return fold_norms_ && FoldableStep(shape);
}

bool ModelForward::FoldableStep(const ForwardShape& shape) const {
  if (!shape.decode_only || DecodeRope() || LinksNorms(shape)) return false;
  return kernels::MatmulRunsOnCublas(*matmul_, QkvProjection(0, shape.num_tokens));
}

bool ModelForward::RopeInAttention(const kernels::MatmulParams& qkv_proj,
                                   const kernels::DecodeAttentionParams& decode) const {
  return DecodeRope() && !decode.prefetch_kv && !kernels::MatmulFusesRope(*matmul_, qkv_proj) &&
         kernels::DecodeAttentionMmaSupports(decode);
}

// Prefill attention alone gives a block of 64 rows with more than kPrefillMaxRuns runs
// (prefill_runs.h) to its CUDA-core kernel, one block per (token, head) walking the whole
// context in order. Measured on the H200 (session 42, rtgen-engine-bench --mixed: D decode rows
// at context 129 beside a new P-token prompt, graph replay, ms, prefill attention alone ->
// split): SmolLM2-135M 4+16 2.28 -> 0.92, 15+100 2.89 -> 1.40, 64+128 3.18 -> 1.52;
// Llama-3.2-1B 4+16 2.05 -> 1.32, 64+128 3.59 -> 1.98; Llama-3-8B 4+16 6.36 -> 5.24, 64+128
// 10.26 -> 7.86. The full server under 300 requests/s (scripts/device/mixed_ab.sh): TPOT p50
// 3.12 -> 0.74 ms with the multi-sequence graphs.
bool ModelForward::SplitsDecodeRows(const ForwardShape& shape) const {
  static const bool enabled = kernels::EnvOnUnlessZero("RTGEN_MIXED_DECODE");
  return enabled && !shape.decode_only && shape.num_seqs >= 2;
}

bool ModelForward::PrefetchesKv(const ForwardShape& shape) const {
  if (!shape.decode_only || DecodePrefetch() == Prefetch::kNever) return false;
  if (DecodePrefetch() == Prefetch::kAlways) return true;
  // Every layer has the same shapes.
  return kernels::MatmulRopeReleasesEarly(*matmul_, QkvProjection(0, shape.num_tokens),
                                          config_.head_dim);
}

kernels::FusedMlpParams ModelForward::MlpParams(int layer) const {
  const ModelConfig& c = config_;
  const DeviceLayer& w = weights_->layers[layer];
  const bool last = layer + 1 == c.num_layers;
  kernels::FusedMlpParams p;
  p.x = At<__nv_bfloat16>(normed_);
  p.consumer = ConsumerLink(2 * layer);
  // The last layer joins its own products (the LM head's GEMV takes no pending ones); the others
  // leave them to the next layer's qkv and o projections (QkvLink, OLink).
  if (last) {
    p.producer = ProducerLink(2 * layer + 1, weights_->final_norm.as<float>(),
                              At<__nv_bfloat16>(final_normed_));
  }
  p.w_gate_up = w.w_gate_up.as<__nv_bfloat16>();
  p.w_down = w.w_down.as<__nv_bfloat16>();
  p.hidden = c.hidden_size;
  p.inter = c.intermediate_size;
  p.pending = At<long long>(mlp_pending_);
  p.arrivals = At<unsigned int>(mlp_arrivals_);
  return p;
}

kernels::GemvNormLink ModelForward::QkvLink(int layer, bool pending) const {
  kernels::GemvNormLink link = ConsumerLink(2 * layer - 1);
  if (pending) {  // the layer before left its down products pending (MlpParams)
    link.scale_by = nullptr;
    link.rebuild = {At<float>(residual_), weights_->layers[layer].attn_norm.as<float>(),
                    At<long long>(mlp_pending_)};
  }
  return link;
}

kernels::GemvNormLink ModelForward::OLink(int layer, bool pending) const {
  kernels::GemvNormLink link = ProducerLink(2 * layer, weights_->layers[layer].ffn_norm.as<float>(),
                                            At<__nv_bfloat16>(normed_));
  if (pending) link.pending = At<long long>(mlp_pending_);  // joined first, then zeroed
  return link;
}

// RTGEN_DIAG_SKIP (timing only, results garbage) may leave out the qkv or o projection here too:
// the pending products are then not joined or zeroed until the last layer's join.
bool ModelForward::FusesMlp() const {
  static const bool enabled = kernels::EnvOptIn("RTGEN_FUSED_MLP");
  if (!enabled || kernels::DiagSkips(kernels::StepPart::kGateUp) ||
      kernels::DiagSkips(kernels::StepPart::kDown)) {
    return false;
  }
  // Every launch the layers' links touch must take them: the fused MLP of a middle and of the last
  // layer, the qkv projection rebuilding its row, the o projection joining pending products.
  // Every layer has the same shapes; layer 1 is the first whose qkv rebuilds its row.
  const ModelConfig& c = config_;
  if (c.num_layers < 2) return false;
  kernels::MatmulParams with_rebuild = QkvProjection(1, 1);
  with_rebuild.link = QkvLink(1, true);
  kernels::MatmulParams with_pending = OProjection(1, 1);
  with_pending.link = OLink(1, true);
  return kernels::FusedMlpSupported(MlpParams(0)) &&
         kernels::FusedMlpSupported(MlpParams(c.num_layers - 1)) &&
         kernels::MatmulTakesLink(*matmul_, with_rebuild, true) &&
         kernels::MatmulTakesLink(*matmul_, with_pending, false);
}

kernels::GemvNormLink ModelForward::ProducerLink(int32_t slot, const float* weight,
                                                 __nv_bfloat16* normed) const {
  kernels::GemvNormLink link;
  link.residual = At<float>(residual_);
  link.weight = weight;
  link.normed = normed;
  link.sum_sq = NormSlot(slot);
  return link;
}

kernels::GemvNormLink ModelForward::ConsumerLink(int32_t slot) const {
  const int32_t slots = 2 * config_.num_layers;
  kernels::GemvNormLink link;
  link.scale_by = NormSlot(slot);
  link.zero_after = NormSlot((slot + slots - 1) % slots);
  link.eps = config_.rms_norm_eps;
  return link;
}

kernels::GemvNormLink ModelForward::ZeroingLink(int32_t slot) const {
  kernels::GemvNormLink link;
  link.zero_after = NormSlot(slot);
  link.zero_only = true;
  return link;
}

unsigned long long* ModelForward::NormSlot(int32_t slot) const {
  return At<unsigned long long>(norm_sums_, slot * kernels::kNormSlotSize);
}

absl::Status ModelForward::Sample(const ForwardShape& shape, const StepArrays& step,
                                  cudaStream_t stream) {
  const int32_t vocab = config_.vocab_size;
  kernels::SampleTokensParams sp{At<float>(logits_), vocab, step.sample_params, step.out_tokens,
                                 step.out_logprobs, shape.num_samples, vocab};
  sp.splits = kernels::PlanSampleSplits(shape.num_samples, vocab, num_sms_);
  sp.split_states = sample_states_.get();
  sp.split_counters = At<int32_t>(sample_counters_);
  sp.chain_token_ids = At<int32_t>(chain_tokens_);
  sp.penalty_entries = step.penalty_entries;
  sp.resolved_token_ids = At<int32_t>(resolved_tokens_);
  sp.top = step.out_top;
  sp.split_top = At<uint64_t>(sample_top_);
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::SampleTokens(sp, stream));
  return absl::OkStatus();
}

}  // namespace rtgen
