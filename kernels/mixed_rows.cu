#include "kernels/launch.h"
#include "kernels/mixed_rows.h"
#include "kernels/prefill_attention.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per row r < max(num_tokens, num_seqs). A sequence's tokens are consecutive rows; a
// row is its sequence's only token when neither neighbouring row (padding aside) belongs to it.
__global__ void __launch_bounds__(kThreads) MixedDecodeRowsKernel(MixedRowsParams p) {
  const int r = blockIdx.x * kThreads + threadIdx.x;
  PdlWait();  // the outputs: the previous step's attention may still read them before this
  PdlLaunchDependents();
  bool decode = false;
  if (r < p.num_tokens) {
    const int32_t pos = p.positions[r], seq = p.token_seq[r];
    const auto same = [&](int o) { return p.positions[o] >= 0 && p.token_seq[o] == seq; };
    decode = pos >= 0 && seq == r && r < p.num_seqs && !(r > 0 && same(r - 1)) &&
             !(r + 1 < p.num_tokens && same(r + 1));
    p.attention_positions[r] = decode ? kPrefillKeepRow : pos;
  }
  if (r < p.num_seqs) p.decode_context_lens[r] = decode ? p.context_lens[r] : 0;
}

}  // namespace

cudaError_t MixedDecodeRows(const MixedRowsParams& p, cudaStream_t stream) {
  const int rows = p.num_tokens > p.num_seqs ? p.num_tokens : p.num_seqs;
  if (rows <= 0) return cudaSuccess;
  return LaunchKernel(MixedDecodeRowsKernel, dim3((rows + kThreads - 1) / kThreads), kThreads, 0,
                      stream, p);
}

}  // namespace rtgen::kernels
