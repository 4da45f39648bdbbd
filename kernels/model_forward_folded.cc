// ModelForward's folded-norm path (model_forward.h FoldsNorms): the weights' fold at creation and
// the decode layer that relies on it.

#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/diag_skip.h"
#include "kernels/env_switch.h"
#include "kernels/model_forward.h"
#include "kernels/norm_fold.h"
#include "kernels/row_rms.h"
#include "kernels/rope.h"
#include "kernels/silu_mul.h"

namespace rtgen {

absl::Status ModelForward::FoldNormsIfUseful() {
  static const bool wanted = kernels::EnvOnUnlessZero("RTGEN_NORM_FOLD");
  fold_norms_ = wanted && FoldableStep(ForwardShape::Decode(capacity_.max_seqs));
  if (!fold_norms_) return absl::OkStatus();
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t qkv_dim = int64_t{c.num_heads + 2 * c.num_kv_heads} * c.head_dim;
  for (const DeviceLayer& w : weights_->layers) {
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::FoldNormIntoWeight(
        w.attn_norm.as<float>(), w.wqkv.as<__nv_bfloat16>(), qkv_dim, h, nullptr));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::FoldNormIntoWeight(
        w.ffn_norm.as<float>(), w.w_gate_up.as<__nv_bfloat16>(), 2 * c.intermediate_size, h,
        nullptr));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the legacy stream's launches
  ASSIGN_OR_RETURN(norm_scales_,
                   DeviceBuffer::Allocate(size_t{2} * capacity_.max_tokens * sizeof(float)));
  ASSIGN_OR_RETURN(side_, kernels::SideStream::Create());
  return absl::OkStatus();
}

absl::Status ModelForward::ProjectionBesideRowScales(const kernels::MatmulParams& proj,
                                                     int which, cudaStream_t stream) {
  RETURN_IF_ERROR(side_->Fork(stream));
  // Joined on every path: a side stream left forked breaks the capture it belongs to (and a later
  // one on that stream).
  absl::Status done = kernels::Matmul(*matmul_, proj, stream);
  if (done.ok()) {
    const kernels::RowInvRmsParams p{normed_.as<__nv_bfloat16>(),
                                     norm_scales_.as<float>() + which * capacity_.max_tokens,
                                     proj.m, config_.hidden_size, config_.rms_norm_eps};
    if (const cudaError_t err = kernels::RowInvRms(p, side_->stream()); err != cudaSuccess) {
      done = cuda_internal::CudaError(err, "kernels::RowInvRms", __FILE__, __LINE__);
    }
  }
  const absl::Status joined = side_->Join(stream);
  return done.ok() ? joined : done;
}

// The residual stream is bf16 in normed_ (the embedding wrote it); each row's RMSNorm scale is
// applied by the kernels after the qkv and gate/up projections, which read the stream itself.
// The scales are computed beside those projections (a one-wave GEMM at these shapes leaves SMs
// free); the branch joins before the kernel that applies them. Its reads of the stream end
// before that kernel, ahead of the next projection that adds to the stream.
absl::Status ModelForward::FoldedLayer(int layer, const ForwardShape& shape,
                                       const StepArrays& step, const KvPool& kv,
                                       cudaStream_t stream) {
  const ModelConfig& c = config_;
  const DeviceLayer& w = weights_->layers[layer];
  const int32_t n = shape.num_tokens, h = c.hidden_size, inter = c.intermediate_size;
  const int32_t q_dim = c.num_heads * c.head_dim;
  __nv_bfloat16* resid = normed_.as<__nv_bfloat16>();
  if (!kernels::DiagSkips(kernels::StepPart::kQkv)) {
    auto [rope, store] = QkvRowsOf(layer, n, step, kv);
    rope.norm = {norm_scales_.as<float>()};  // the attention norm's scale, on q, k and v
    RETURN_IF_ERROR(ProjectionBesideRowScales(QkvProjection(layer, n), 0, stream));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RopeKvStore(rope, store, stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kAttention)) {
    RTGEN_CUDA_RETURN_IF_ERROR(
        kernels::DecodeAttention(DecodeParams(layer, shape, step, kv), stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kO)) {  // resid += attn wo^T
    kernels::MatmulParams o{attn_.as<__nv_bfloat16>(), w.wo.as<__nv_bfloat16>(), resid, false,
                            n, h, q_dim};
    o.accumulate = true;
    RETURN_IF_ERROR(kernels::Matmul(*matmul_, o, stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kGateUp)) {
    __nv_bfloat16* gate_up = gate_up_.as<__nv_bfloat16>();
    RETURN_IF_ERROR(ProjectionBesideRowScales(
        {resid, w.w_gate_up.as<__nv_bfloat16>(), gate_up, false, n, 2 * inter, h}, 1, stream));
    // The FFN norm's scale, applied to gate and up.
    const kernels::SiluMulParams silu{gate_up, act_.as<__nv_bfloat16>(), n, inter,
                                      {norm_scales_.as<float>() + capacity_.max_tokens}};
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::SiluMul(silu, stream));
  }
  if (!kernels::DiagSkips(kernels::StepPart::kDown)) {  // resid += act w_down^T
    kernels::MatmulParams down{act_.as<__nv_bfloat16>(), w.w_down.as<__nv_bfloat16>(), resid,
                               false, n, h, inter};
    down.accumulate = true;
    RETURN_IF_ERROR(kernels::Matmul(*matmul_, down, stream));
  }
  return absl::OkStatus();
}

}  // namespace rtgen
