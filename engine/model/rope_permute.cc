#include "engine/model/rope_permute.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rtgen {

namespace {

// Moves row `gguf_row(h, i, j)` to/from `hf_row(h, i, j)` for every head h.
absl::Status Reorder(int n_heads, int head_dim, bool to_hf, Matrix* m) {
  if (head_dim <= 0 || head_dim % 2 != 0 || n_heads <= 0 ||
      m->rows != static_cast<int64_t>(n_heads) * head_dim ||
      static_cast<int64_t>(m->data.size()) != m->rows * m->cols) {
    return absl::InvalidArgumentError(absl::StrCat("rope permute: matrix of ", m->rows,
                                                   " rows does not hold ", n_heads,
                                                   " heads of dim ", head_dim));
  }
  const int half = head_dim / 2;
  const int64_t cols = m->cols;
  // The file's blocks (if kept) move with their rows: a row's blocks are contiguous.
  const bool blocks = m->quantized.format != BlockFormat::kNone;
  const int64_t row_bytes = blocks ? static_cast<int64_t>(m->quantized.bytes.size()) / m->rows : 0;
  std::vector<float> out(m->data.size());
  std::vector<uint8_t> out_blocks(m->quantized.bytes.size());
  for (int h = 0; h < n_heads; ++h) {
    const int64_t base = static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      for (int j = 0; j < 2; ++j) {
        const int64_t gguf_row = base + 2 * i + j;
        const int64_t hf_row = base + static_cast<int64_t>(j) * half + i;
        const int64_t src = to_hf ? gguf_row : hf_row;
        const int64_t dst = to_hf ? hf_row : gguf_row;
        std::copy_n(m->data.begin() + src * cols, cols, out.begin() + dst * cols);
        std::copy_n(m->quantized.bytes.begin() + src * row_bytes, row_bytes,
                    out_blocks.begin() + dst * row_bytes);
      }
    }
  }
  m->data = std::move(out);
  m->quantized.bytes = std::move(out_blocks);
  return absl::OkStatus();
}

}  // namespace

absl::Status UnpermuteGgufQk(int n_heads, int head_dim, Matrix* m) {
  return Reorder(n_heads, head_dim, /*to_hf=*/true, m);
}

absl::Status PermuteHfQk(int n_heads, int head_dim, Matrix* m) {
  return Reorder(n_heads, head_dim, /*to_hf=*/false, m);
}

}  // namespace rtgen
