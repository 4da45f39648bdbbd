#include "kernels/persistent_decoder.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/env_switch.h"
#include "kernels/model_forward.h"
#include "kernels/persistent_trace.h"

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
  // Attention keys per block (RTGEN_PERSISTENT_KEYS_PER_PART, for A/B; default 128; values
  // outside 16..65536 are reported and taken as the default).
  p.keys_per_part =
      static_cast<int32_t>(kernels::EnvIntIn("RTGEN_PERSISTENT_KEYS_PER_PART", 16, 65536, 128));
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
  // The flagged words and the launch count: zero now; each launch flags its words with the
  // count + 1 and advances it (persistent_decode.h).
  const size_t exchange_bytes = kernels::PersistentExchangeWords(p) * sizeof(uint64_t);
  ASSIGN_OR_RETURN(d->exchange_, DeviceBuffer::Allocate(exchange_bytes));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(d->exchange_.get(), 0, exchange_bytes));
  ASSIGN_OR_RETURN(d->epoch_, DeviceBuffer::Allocate(2 * sizeof(uint32_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(d->epoch_.get(), 0, 2 * sizeof(uint32_t)));
  // cudaMemset runs on the legacy stream, which the backend's non-blocking stream does not wait
  // for: finish it here, or a first launch could see words zeroed under it.
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());

  p.layers = d->layers_.as<const kernels::PersistentLayer>();
  p.final_norm = weights.final_norm.as<const float>();
  p.lm_head = weights.output_matrix();
  p.inv_freq = weights.inv_freq.as<const float>();
  if (kernels::EnvOptIn("RTGEN_PERSISTENT_TRACE")) {
    const size_t stamps = size_t{2} * config.num_layers * kernels::kPersistentTracePoints *
                          static_cast<size_t>(d->launch_.grid);
    ASSIGN_OR_RETURN(d->trace_, DeviceBuffer::Allocate(stamps * sizeof(uint64_t)));
    p.trace = d->trace_.as<uint64_t>();
  }
  p.exchange = d->exchange_.as<uint64_t>();
  p.epoch = d->epoch_.as<uint32_t>();
  return d;
}

PersistentDecoder::~PersistentDecoder() {
  if (params_.trace != nullptr) {
    PrintPersistentTrace(params_.trace, params_.num_layers, launch_.grid);
  }
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
  p.logits = a.logits;
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::PersistentDecode(p, launch_, stream));
  return absl::OkStatus();
}

}  // namespace rtgen
