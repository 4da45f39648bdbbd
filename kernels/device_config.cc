#include "kernels/device_config.h"

#include "absl/strings/str_cat.h"

namespace rtgen {

absl::Status CheckDeviceConfig(const ModelConfig& c) {
  const auto refuse = [](const char* field, int value, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat("model config ", field, " ", value,
                                                   ": the CUDA backend needs ", want));
  };
  if (c.vocab_size <= 0) return refuse("vocab_size", c.vocab_size, "a positive size");
  if (c.hidden_size <= 0) return refuse("hidden_size", c.hidden_size, "a positive size");
  if (c.intermediate_size <= 0) {
    return refuse("intermediate_size", c.intermediate_size, "a positive size");
  }
  if (c.num_layers <= 0) return refuse("num_layers", c.num_layers, "a positive count");
  if (c.num_heads <= 0) return refuse("num_heads", c.num_heads, "a positive count");
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return refuse("num_kv_heads", c.num_kv_heads, "a positive divisor of num_heads");
  }
  if (c.head_dim <= 0 || c.head_dim % 8 != 0 || c.head_dim > 256) {
    return refuse("head_dim", c.head_dim, "a multiple of 8 up to 256");
  }
  return absl::OkStatus();
}

}  // namespace rtgen
