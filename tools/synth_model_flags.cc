#include "tools/synth_model_flags.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/synthetic_model.h"

namespace rtgen::tools {
namespace {

// A given dimension flag's value into *field (*given set); nothing when the text is empty. Limits
// keep a model's tensors within what one machine writes (the 8B shape is far inside them).
absl::Status Apply(const char* flag, const std::string& text, int32_t limit, int32_t* field,
                   bool* given) {
  if (text.empty()) return absl::OkStatus();
  int32_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v <= 0 || v > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be an integer in 1..", limit, ", got '", text, "'"));
  }
  *field = v;
  *given = true;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> SynthShapeConfig(const SynthShapeFlags& f) {
  ASSIGN_OR_RETURN(ModelConfig c, SyntheticShape(f.shape));
  bool dims = false, head_dim = false;
  RETURN_IF_ERROR(Apply("hidden", f.hidden, 1 << 16, &c.hidden_size, &dims));
  RETURN_IF_ERROR(Apply("layers", f.layers, 1 << 10, &c.num_layers, &dims));
  RETURN_IF_ERROR(Apply("heads", f.heads, 1 << 10, &c.num_heads, &dims));
  RETURN_IF_ERROR(Apply("kv-heads", f.kv_heads, 1 << 10, &c.num_kv_heads, &dims));
  RETURN_IF_ERROR(Apply("ffn", f.ffn, 1 << 20, &c.intermediate_size, &dims));
  RETURN_IF_ERROR(Apply("vocab", f.vocab, 1 << 22, &c.vocab_size, &dims));
  RETURN_IF_ERROR(Apply("head-dim", f.head_dim, 1 << 10, &c.head_dim, &head_dim));
  if (dims || head_dim) c.name = "synthetic-custom";
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--heads ", c.num_heads,
                                                   " is not a multiple of --kv-heads ",
                                                   c.num_kv_heads));
  }
  if (dims && !head_dim) {
    if (c.hidden_size % c.num_heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden ", c.hidden_size, " is not a multiple of --heads ", c.num_heads,
                       " (give --head-dim)"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (f.tie == "true" || f.tie == "1") {
    c.tie_word_embeddings = true;
  } else if (f.tie == "false" || f.tie == "0") {
    c.tie_word_embeddings = false;
  } else if (!f.tie.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tie must be true or false, got '", f.tie,
                                                   "'"));
  }
  if (const absl::Status valid = c.Validate(); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the flags give an invalid shape: ", valid.message()));
  }
  return c;
}

}  // namespace rtgen::tools
