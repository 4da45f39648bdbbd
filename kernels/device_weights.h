#pragma once
// The model's weights on the device: matrices in bf16 (HF layout [out, in], q/k/v and gate/up
// stacked so each needs one matmul), norm weights and RoPE frequencies in fp32.

#include <cuda_bf16.h>

#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "kernels/device_buffer.h"
#include "kernels/device_config.h"  // CheckDeviceConfig

namespace rtgen {

struct DeviceLayer {
  DeviceBuffer attn_norm;  // f32 [hidden]
  DeviceBuffer ffn_norm;   // f32 [hidden]
  DeviceBuffer wqkv;       // bf16 [q_dim + 2 * kv_dim, hidden]: wq, wk, wv rows stacked
  DeviceBuffer wo;         // bf16 [hidden, q_dim]
  DeviceBuffer w_gate_up;  // bf16 [2 * intermediate, hidden]: gate rows then up rows
  DeviceBuffer w_down;     // bf16 [hidden, intermediate]
};

struct DeviceWeights {
  std::vector<DeviceLayer> layers;
  DeviceBuffer embedding;    // bf16 [vocab, hidden]
  DeviceBuffer final_norm;   // f32 [hidden]
  DeviceBuffer lm_head;      // bf16 [vocab, hidden]; empty when tied
  DeviceBuffer inv_freq;     // f32 [head_dim / 2]
  const __nv_bfloat16* output_matrix() const {
    return (lm_head.get() ? lm_head : embedding).as<const __nv_bfloat16>();
  }
  int64_t bytes = 0;         // total device bytes
};

// Checks every shape against `config` (naming the first bad tensor), converts to bf16 and
// uploads; the fp32 host tensors are released as they go.
absl::StatusOr<DeviceWeights> UploadWeights(const ModelConfig& config, ModelWeights weights);

}  // namespace rtgen
