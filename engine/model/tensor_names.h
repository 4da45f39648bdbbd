#pragma once
// The tensor names a Llama model reads, per file format: a file holding any other tensor (layers
// past the layer count, biases, projections of another architecture) is refused naming it, not
// loaded with that tensor left out.

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rtgen {

struct TensorNameScheme {
  std::string format;                // "gguf", "safetensors": the errors' prefix
  std::string layer_prefix;          // a layer's tensors are "<prefix><index>.<suffix>"
  std::vector<std::string> per_layer;  // the suffixes every layer may have
  std::vector<std::string> global;     // whole names outside the layers
};

// llama.cpp's names (blk.N.attn_q.weight, ...; rope_freqs.weight is read by the config).
const TensorNameScheme& GgufLlamaTensorNames();
// Hugging Face's names (model.layers.N.self_attn.q_proj.weight, ...). Also accepted: the rotary
// inverse frequencies older checkpoints saved per layer (recomputed, not read) and lm_head.weight
// beside tied embeddings (a copy some checkpoints keep).
const TensorNameScheme& SafetensorsLlamaTensorNames();

// OK when `name` is one `scheme` reads for a model of `num_layers` layers (index < num_layers,
// written without leading zeros); UNIMPLEMENTED for a bias; otherwise INVALID_ARGUMENT naming the
// tensor and the count.
absl::Status CheckTensorIsUsed(const TensorNameScheme& scheme, int num_layers,
                               const std::string& name);

}  // namespace rtgen
