#pragma once
// llama.cpp's converter reorders the rows of wq/wk so that RoPE can rotate adjacent pairs
// (2i, 2i+1). Hugging Face rotates pairs (i, i + head_dim/2) ("rotate half"). Within each head,
// GGUF row 2*i + j (i in [0, head_dim/2), j in {0, 1}) holds HF row j*head_dim/2 + i.

#include "absl/status/status.h"
#include "engine/model/model_weights.h"

namespace rtgen {

// Reorders `m`'s rows (n_heads * head_dim of them) from GGUF order into HF order, in place.
absl::Status UnpermuteGgufQk(int n_heads, int head_dim, Matrix* m);
// The inverse (HF order -> GGUF order), used by the GGUF writer of synthetic models and tests.
absl::Status PermuteHfQk(int n_heads, int head_dim, Matrix* m);

}  // namespace rtgen
