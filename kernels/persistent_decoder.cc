#include "kernels/persistent_decoder.h"

#include <cmath>
#include <vector>

#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/env_switch.h"
#include "kernels/model_forward.h"

namespace rtgen {

bool PersistentDecodeWanted(bool option) {
  return kernels::EnvOnUnlessZero("RTGEN_PERSISTENT_DECODE", option);
}

absl::StatusOr<std::unique_ptr<PersistentDecoder>> PersistentDecoder::CreateIfSupported(
    const ModelConfig& config, const DeviceWeights& weights) {
  std::unique_ptr<PersistentDecoder> d(new PersistentDecoder());
  kernels::PersistentDecodeParams& p = d->params_;
  p.num_layers = config.num_layers;
  p.hidden = config.hidden_size;
  p.num_heads = config.num_heads;
  p.num_kv_heads = config.num_kv_heads;
  p.head_dim = config.head_dim;
  p.inter = config.intermediate_size;
  p.vocab = config.vocab_size;
  p.eps = config.rms_norm_eps;
  p.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  p.block_size = 1;  // the pool's block size is set per Run; > 0 for the shape check
  int device = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  d->launch_ = kernels::ConfigurePersistentDecode(p, device);
  if (d->launch_.grid <= 0) return nullptr;

  std::vector<kernels::PersistentLayer> layers(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    const DeviceLayer& w = weights.layers[i];
    layers[i] = {w.attn_norm.as<const float>(),         w.ffn_norm.as<const float>(),
                 w.wqkv.as<const __nv_bfloat16>(),      w.wo.as<const __nv_bfloat16>(),
                 w.w_gate_up.as<const __nv_bfloat16>(), w.w_down.as<const __nv_bfloat16>()};
  }
  const size_t layer_bytes = layers.size() * sizeof(kernels::PersistentLayer);
  ASSIGN_OR_RETURN(d->layers_, DeviceBuffer::Allocate(layer_bytes));
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d->layers_.get(), layers.data(), layer_bytes, cudaMemcpyHostToDevice));
  const size_t parts = size_t{1} * config.num_heads * kernels::kPersistentMaxChunks;
  ASSIGN_OR_RETURN(d->part_acc_,
                   DeviceBuffer::Allocate(parts * config.head_dim * sizeof(float)));
  ASSIGN_OR_RETURN(d->part_ml_, DeviceBuffer::Allocate(parts * 2 * sizeof(float)));
  // The two barrier words: zero now, and every launch leaves them zero.
  ASSIGN_OR_RETURN(d->barrier_, DeviceBuffer::Allocate(2 * sizeof(uint32_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(d->barrier_.get(), 0, 2 * sizeof(uint32_t)));

  p.layers = d->layers_.as<const kernels::PersistentLayer>();
  p.final_norm = weights.final_norm.as<const float>();
  p.lm_head = weights.output_matrix();
  p.inv_freq = weights.inv_freq.as<const float>();
  p.part_acc = d->part_acc_.as<float>();
  p.part_ml = d->part_ml_.as<float>();
  p.barrier = d->barrier_.as<uint32_t>();
  return d;
}

absl::Status PersistentDecoder::Run(const StepArrays& step, const KvPool& kv,
                                    const PersistentActivations& a, cudaStream_t stream) {
  kernels::PersistentDecodeParams p = params_;
  p.positions = step.positions;
  p.slot_mapping = step.slot_mapping;
  p.context_lens = step.context_lens;
  p.block_table = step.block_tables;
  p.k_cache = kv.k.as<__nv_bfloat16>();
  p.v_cache = kv.v.as<__nv_bfloat16>();
  p.layer_elems = kv.layer_elems;
  p.block_size = kv.block_size;
  p.residual = a.residual;
  p.qkv = a.qkv;
  p.attn = a.attn;
  p.act = a.act;
  p.logits = a.logits;
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::PersistentDecode(p, launch_, stream));
  return absl::OkStatus();
}

}  // namespace rtgen
