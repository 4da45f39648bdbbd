#include "kernels/embedding.h"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

__global__ void EmbeddingKernel(EmbeddingParams p) {
  PdlWait();  // out (the residual stream) may still be read by the previous step's kernels
  PdlLaunchDependents();
  const int t = blockIdx.x;
  const int32_t id = p.token_ids[t];
  float* out = p.out + static_cast<int64_t>(t) * p.hidden;
  if (id < 0 || id >= p.vocab) {
    for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  const __nv_bfloat16* row = p.table + static_cast<int64_t>(id) * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) out[i] = __bfloat162float(row[i]);
}

}  // namespace

cudaError_t Embedding(EmbeddingParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  return LaunchKernel(EmbeddingKernel, p.num_tokens, 256, 0, stream, p);
}

}  // namespace rtgen::kernels
