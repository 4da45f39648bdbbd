#include "kernels/rope.h"

namespace rtgen::kernels {
namespace {

// One block per token; threads walk the (head, pair) grid of q then k. The angle is computed in
// fp64 so large positions keep full precision.
__global__ void RopeKernel(RopeParams p) {
  const int t = blockIdx.x;
  const int half = p.head_dim / 2;
  const double pos = static_cast<double>(p.positions[t]);
  const int q_pairs = p.num_heads * half;
  const int total = (p.num_heads + p.num_kv_heads) * half;
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    const bool is_q = j < q_pairs;
    const int jj = is_q ? j : j - q_pairs;
    const int head = jj / half, i = jj % half;
    __nv_bfloat16* x = (is_q ? p.q : p.k) + t * p.row_stride + head * p.head_dim;
    double s, c;
    sincos(pos * static_cast<double>(p.inv_freq[i]), &s, &c);
    const float cf = static_cast<float>(c), sf = static_cast<float>(s);
    const float a = __bfloat162float(x[i]), b = __bfloat162float(x[i + half]);
    x[i] = __float2bfloat16(a * cf - b * sf);
    x[i + half] = __float2bfloat16(b * cf + a * sf);
  }
}

}  // namespace

cudaError_t Rope(RopeParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  RopeKernel<<<p.num_tokens, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace rtgen::kernels
