#pragma once
// rtgen-synth-model's shape flags: a named shape with any of its dimensions replaced. Host code
// without flags parsing of its own (the binary reads the flags as text and hands them here), so
// every refusal is tested on the CPU.

#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace rtgen::tools {

// The flags as given on the command line: empty text is a flag not given.
struct SynthShapeFlags {
  std::string shape = "tiny";  // smollm2-135m | llama3.2-1b | llama3-8b | tiny
  std::string hidden, layers, heads, kv_heads, ffn, vocab, head_dim;
  std::string tie;  // true | false (default: the shape's own)
};

// The shape's config with each given dimension replaced (then named "synthetic-custom"): head_dim
// is hidden / heads unless --head-dim is given, the LM head tied as the shape's unless --tie is.
// An error names the flag: a value that is not a positive integer or is past its limit, heads
// not a multiple of kv heads, hidden not a multiple of heads without --head-dim.
absl::StatusOr<ModelConfig> SynthShapeConfig(const SynthShapeFlags& flags);

}  // namespace rtgen::tools
