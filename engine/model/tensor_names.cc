#include "engine/model/tensor_names.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rtgen {

namespace {

bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// True when `rest` ("<index>.<suffix>") names a layer below `num_layers` and a known suffix.
bool IsLayerTensor(const TensorNameScheme& scheme, int num_layers, std::string_view rest) {
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view digits = rest.substr(0, dot);
  if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) return false;
  if (digits.size() > 1 && digits[0] == '0') return false;  // "01" is no layer's index
  int64_t index = 0;
  if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &index) ||
      index >= num_layers) {
    return false;
  }
  return Contains(scheme.per_layer, rest.substr(dot + 1));
}

}  // namespace

const TensorNameScheme& GgufLlamaTensorNames() {
  static const TensorNameScheme* const kScheme = new TensorNameScheme{
      "gguf",
      "blk.",
      {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
       "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
       "ffn_down.weight"},
      {"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"}};
  return *kScheme;
}

const TensorNameScheme& SafetensorsLlamaTensorNames() {
  static const TensorNameScheme* const kScheme = new TensorNameScheme{
      "safetensors",
      "model.layers.",
      {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
       "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
       "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
       "self_attn.rotary_emb.inv_freq"},
      {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}};
  return *kScheme;
}

absl::Status CheckTensorIsUsed(const TensorNameScheme& scheme, int num_layers,
                               const std::string& name) {
  // The forward passes have no bias terms (llama.cpp loads attn_q/k/v.bias as optional tensors
  // of the llama architecture; some Hugging Face Llama-likes have them): said as such.
  if (absl::EndsWith(name, ".bias")) {
    return absl::UnimplementedError(absl::StrCat(scheme.format, ": tensor '", name,
                                                 "': bias weights are not supported (no bias "
                                                 "terms)"));
  }
  if (Contains(scheme.global, name)) return absl::OkStatus();
  if (absl::StartsWith(name, scheme.layer_prefix) &&
      IsLayerTensor(scheme, num_layers,
                    std::string_view(name).substr(scheme.layer_prefix.size()))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(scheme.format, ": tensor '", name, "' is not one a ", num_layers,
                   "-layer Llama model reads (a wrong layer count, or weights of another "
                   "architecture)"));
}

}  // namespace rtgen
