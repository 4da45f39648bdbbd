#include <cstdint>

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

// Vector path (head_dim % 8 == 0): a thread owns units of 4 consecutive pair indices i..i+3 of
// one head (8 bytes from each half) and issues the loads of all its units before the first
// rotation, so a token costs one memory round trip instead of one per strided iteration.
constexpr int kUnitsPerThread = 4;

__device__ __forceinline__ uint2 RotateBf16x4(uint2 x, uint2 y, const float* cf, const float* sf,
                                              bool first_half) {
  // first_half: out = x * cos - y * sin (x the low half); else out = x * cos + y * sin.
  const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&x);
  const __nv_bfloat162* y2 = reinterpret_cast<const __nv_bfloat162*>(&y);
  uint2 out;
  __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const float2 a = __bfloat1622float2(x2[e]), b = __bfloat1622float2(y2[e]);
    const float c0 = cf[2 * e], c1 = cf[2 * e + 1], s0 = sf[2 * e], s1 = sf[2 * e + 1];
    o2[e] = first_half ? __floats2bfloat162_rn(a.x * c0 - b.x * s0, a.y * c1 - b.y * s1)
                       : __floats2bfloat162_rn(a.x * c0 + b.x * s0, a.y * c1 + b.y * s1);
  }
  return out;
}

__global__ void __launch_bounds__(256) RopeKvStoreVecKernel(RopeParams r, KvStoreParams s) {
  __shared__ float s_cos[kMaxHalf], s_sin[kMaxHalf];
  const int t = blockIdx.x;
  const int half = r.head_dim / 2, units_per_head = half / 4;
  const double pos = static_cast<double>(r.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double sn, cs;
    sincos(pos * static_cast<double>(r.inv_freq[i]), &sn, &cs);
    s_cos[i] = static_cast<float>(cs);
    s_sin[i] = static_cast<float>(sn);
  }
  const int32_t slot = s.slot_mapping != nullptr ? s.slot_mapping[t] : -1;
  __syncthreads();
  PdlWait();
  PdlLaunchDependents();
  const int64_t cache_row = static_cast<int64_t>(slot) * s.kv_dim;
  const int q_units = r.num_heads * units_per_head;
  const int total = (r.num_heads + r.num_kv_heads) * units_per_head;
  for (int base = 0; base < total; base += kUnitsPerThread * blockDim.x) {
    uint2 lo[kUnitsPerThread], hi[kUnitsPerThread];
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int j = base + u * blockDim.x + threadIdx.x;
      if (j >= total) continue;
      const bool is_q = j < q_units;
      const int jj = is_q ? j : j - q_units;
      const __nv_bfloat16* x = (is_q ? r.q : r.k) + t * r.row_stride +
                               (jj / units_per_head) * r.head_dim + (jj % units_per_head) * 4;
      lo[u] = *reinterpret_cast<const uint2*>(x);
      hi[u] = *reinterpret_cast<const uint2*>(x + half);
    }
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int j = base + u * blockDim.x + threadIdx.x;
      if (j >= total) continue;
      const bool is_q = j < q_units;
      const int jj = is_q ? j : j - q_units;
      const int head = jj / units_per_head, i = (jj % units_per_head) * 4;
      __nv_bfloat16* x = (is_q ? r.q : r.k) + t * r.row_stride + head * r.head_dim + i;
      const uint2 new_lo = RotateBf16x4(lo[u], hi[u], s_cos + i, s_sin + i, true);
      const uint2 new_hi = RotateBf16x4(hi[u], lo[u], s_cos + i, s_sin + i, false);
      *reinterpret_cast<uint2*>(x) = new_lo;
      *reinterpret_cast<uint2*>(x + half) = new_hi;
      if (!is_q && slot >= 0) {
        __nv_bfloat16* kc = s.k_cache + cache_row + head * r.head_dim + i;
        *reinterpret_cast<uint2*>(kc) = new_lo;
        *reinterpret_cast<uint2*>(kc + half) = new_hi;
      }
    }
  }
  if (slot < 0) return;
  const uint4* v = reinterpret_cast<const uint4*>(s.v + t * s.row_stride);
  uint4* vc = reinterpret_cast<uint4*>(s.v_cache + cache_row);
  for (int i = threadIdx.x; i < s.kv_dim / 8; i += blockDim.x) vc[i] = v[i];
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
  // Vector path: 8-byte q/k and 16-byte v accesses need head_dim % 8 == 0, row strides of a
  // multiple of 8 elements and aligned bases (cudaMalloc'd buffers at q/k/v offsets of whole
  // heads). store.row_stride == rope.row_stride (checked above).
  const bool aligned = rope.head_dim % 8 == 0 && rope.row_stride % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(rope.q) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(rope.k) % 8 == 0 &&
                       (store.slot_mapping == nullptr ||
                        reinterpret_cast<uintptr_t>(store.v) % 16 == 0);
  if (aligned) {
    return LaunchKernel(RopeKvStoreVecKernel, rope.num_tokens, threads, 0, stream, rope, store);
  }
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
