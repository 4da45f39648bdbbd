#include "kernels/kernel_trace.cuh"
#include "kernels/kv_store.h"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

__global__ void KvStoreKernel(KvStoreParams p) {
  RTGEN_TRACE_KERNEL(kRopeKvStore);
  PdlWait();
  PdlLaunchDependents();
  const int t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0) return;
  const __nv_bfloat16* k = p.k + t * p.row_stride;
  const __nv_bfloat16* v = p.v + t * p.row_stride;
  const int64_t base = static_cast<int64_t>(slot) * p.kv_dim;
  for (int i = threadIdx.x; i < p.kv_dim; i += blockDim.x) {
    p.k_cache[base + i] = k[i];
    p.v_cache[base + i] = v[i];
  }
}

}  // namespace

cudaError_t KvStore(KvStoreParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  return LaunchKernel(KvStoreKernel, p.num_tokens, 128, 0, stream, p);
}

}  // namespace rtgen::kernels
