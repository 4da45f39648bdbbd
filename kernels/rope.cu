#include "kernels/rope.h"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

constexpr int kMaxHalf = 128;  // head_dim <= 256

// One block per token; threads walk the (head, pair) grid of q then k. Each angle is computed
// once per token, in fp64 so large positions keep full precision, then the pairs rotate in fp32.
// With s.slot_mapping null (Rope alone) nothing is written to the cache.
__global__ void __launch_bounds__(256) RopeKvStoreKernel(RopeParams r, KvStoreParams s) {
  __shared__ float s_cos[kMaxHalf], s_sin[kMaxHalf];
  const int t = blockIdx.x;
  const int half = r.head_dim / 2;
  // Prologue: positions (a step array, filled by a copy before the step) and inv_freq are
  // written by no kernel, so this overlaps the QKV projection's tail.
  const double pos = static_cast<double>(r.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double sn, cs;
    sincos(pos * static_cast<double>(r.inv_freq[i]), &sn, &cs);
    s_cos[i] = static_cast<float>(cs);
    s_sin[i] = static_cast<float>(sn);
  }
  __syncthreads();
  PdlWait();
  PdlLaunchDependents();
  const int32_t slot = s.slot_mapping != nullptr ? s.slot_mapping[t] : -1;
  const int64_t cache_row = static_cast<int64_t>(slot) * s.kv_dim;
  const int q_pairs = r.num_heads * half;
  const int total = (r.num_heads + r.num_kv_heads) * half;
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    const bool is_q = j < q_pairs;
    const int jj = is_q ? j : j - q_pairs;
    const int head = jj / half, i = jj % half;
    __nv_bfloat16* x = (is_q ? r.q : r.k) + t * r.row_stride + head * r.head_dim;
    const float cf = s_cos[i], sf = s_sin[i];
    const float a = __bfloat162float(x[i]), b = __bfloat162float(x[i + half]);
    const __nv_bfloat16 lo = __float2bfloat16(a * cf - b * sf);
    const __nv_bfloat16 hi = __float2bfloat16(b * cf + a * sf);
    x[i] = lo;
    x[i + half] = hi;
    if (!is_q && slot >= 0) {
      __nv_bfloat16* kc = s.k_cache + cache_row + head * r.head_dim;
      kc[i] = lo;
      kc[i + half] = hi;
    }
  }
  if (slot < 0) return;
  const __nv_bfloat16* v = s.v + t * s.row_stride;
  for (int i = threadIdx.x; i < s.kv_dim; i += blockDim.x) s.v_cache[cache_row + i] = v[i];
}

}  // namespace

cudaError_t RopeKvStore(const RopeParams& rope, const KvStoreParams& store, cudaStream_t stream) {
  if (rope.num_tokens <= 0) return cudaSuccess;
  if (rope.head_dim <= 0 || rope.head_dim % 2 != 0 || rope.head_dim / 2 > kMaxHalf ||
      store.k != rope.k || store.row_stride != rope.row_stride ||
      store.num_tokens != rope.num_tokens || store.kv_dim != rope.num_kv_heads * rope.head_dim) {
    return cudaErrorInvalidValue;
  }
  const int pairs = (rope.num_heads + rope.num_kv_heads) * rope.head_dim / 2;
  const int threads = pairs >= 2048 ? 256 : 128;
  return LaunchKernel(RopeKvStoreKernel, rope.num_tokens, threads, 0, stream, rope, store);
}

cudaError_t Rope(RopeParams p, cudaStream_t stream) {
  KvStoreParams no_store;  // slot_mapping null: rotate only
  no_store.k = p.k;
  no_store.row_stride = p.row_stride;
  no_store.num_tokens = p.num_tokens;
  no_store.kv_dim = p.num_kv_heads * p.head_dim;
  return RopeKvStore(p, no_store, stream);
}

}  // namespace rtgen::kernels
