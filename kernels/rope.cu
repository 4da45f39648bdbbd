#include <cstdint>

#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/rope.h"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kMaxHalf = 128;  // head_dim <= 256

// Token t's angles into shared memory (the caller syncs). Called before the PDL wait: positions
// (a step array, filled by a copy before the step) and inv_freq are written by no kernel, so this
// overlaps the QKV projection's tail.
__device__ __forceinline__ void LoadAngles(const RopeParams& r, int t, float* s_cos,
                                           float* s_sin) {
  const int32_t pos = r.positions[t];
  for (int i = threadIdx.x; i < r.head_dim / 2; i += blockDim.x) {
    RopeCosSin(pos, r.inv_freq[i], &s_cos[i], &s_sin[i]);
  }
}

// With a folded norm (r.norm on), token t's scale: the angles' cos and sin are multiplied by it
// (a rotation is linear, so q and k come out scaled with one rounding) and it is returned for v;
// 1 otherwise. After the PDL wait (the scales are an earlier kernel's output); every thread of
// the block calls it.
__device__ __forceinline__ float ScaleAngles(const RopeParams& r, int t, float* s_cos,
                                             float* s_sin) {
  if (!r.norm.on()) return 1.0f;
  const float scale = r.norm.inv_rms[t];
  for (int i = threadIdx.x; i < r.head_dim / 2; i += blockDim.x) {
    s_cos[i] *= scale;
    s_sin[i] *= scale;
  }
  __syncthreads();
  return scale;
}

// 8 bf16 values times `scale`, rounded once.
__device__ __forceinline__ uint4 ScaleBf16x8(uint4 v, float scale) {
  float f[8];
  UnpackBf16x8(v, f);
  uint4 out;
  __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
  for (int e = 0; e < 4; ++e) o[e] = __floats2bfloat162_rn(f[2 * e] * scale, f[2 * e + 1] * scale);
  return out;
}

// One block per token; threads walk the (head, pair) grid of q then k. With s.slot_mapping null
// (Rope alone) nothing is written to the cache.
__global__ void __launch_bounds__(256) RopeKvStoreKernel(RopeParams r, KvStoreParams s) {
  RTGEN_TRACE_KERNEL(kRopeKvStore);
  __shared__ float s_cos[kMaxHalf], s_sin[kMaxHalf];
  const int t = blockIdx.x;
  const int half = r.head_dim / 2;
  LoadAngles(r, t, s_cos, s_sin);
  __syncthreads();
  PdlWait();
  PdlLaunchDependents();
  const float scale = ScaleAngles(r, t, s_cos, s_sin);
  const int32_t slot = s.slot_mapping != nullptr ? s.slot_mapping[t] : -1;
  const int64_t cache_row = static_cast<int64_t>(slot) * s.kv_dim;
  const int q_pairs = r.num_heads * half;
  const int total = (r.num_heads + r.num_kv_heads) * half;
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    const bool is_q = j < q_pairs;
    const int jj = is_q ? j : j - q_pairs;
    const int head = jj / half, i = jj % half;
    __nv_bfloat16* x = (is_q ? r.q : r.k) + t * r.row_stride + head * r.head_dim;
    const RotatedPair rot =
        RotateHalf(__bfloat162float(x[i]), __bfloat162float(x[i + half]), s_cos[i], s_sin[i]);
    x[i] = rot.lo;
    x[i + half] = rot.hi;
    if (!is_q && slot >= 0) {
      __nv_bfloat16* kc = s.k_cache + cache_row + head * r.head_dim;
      kc[i] = rot.lo;
      kc[i + half] = rot.hi;
    }
  }
  if (slot < 0) return;
  const __nv_bfloat16* v = s.v + t * s.row_stride;
  for (int i = threadIdx.x; i < s.kv_dim; i += blockDim.x) {
    s.v_cache[cache_row + i] =
        r.norm.on() ? __float2bfloat16(__bfloat162float(v[i]) * scale) : v[i];
  }
}

// Vector path (head_dim % 8 == 0): a thread owns units of 4 consecutive pair indices i..i+3 of
// one head (8 bytes from each half) and issues the loads of all its units, and of its first
// kVChunksPerThread 16-byte chunks of v, before the first rotation, so a token costs one memory
// round trip instead of one per strided iteration (v read after the rotations was a second one:
// ~3.3 us a launch at Llama-3-8B batch 64).
constexpr int kUnitsPerThread = 4;
constexpr int kVChunksPerThread = 2;

__global__ void __launch_bounds__(256) RopeKvStoreVecKernel(RopeParams r, KvStoreParams s) {
  RTGEN_TRACE_KERNEL(kRopeKvStore);
  __shared__ float s_cos[kMaxHalf], s_sin[kMaxHalf];
  const int t = blockIdx.x;
  const int half = r.head_dim / 2, units_per_head = half / 4;
  LoadAngles(r, t, s_cos, s_sin);
  const int32_t slot = s.slot_mapping != nullptr ? s.slot_mapping[t] : -1;
  __syncthreads();
  PdlWait();
  PdlLaunchDependents();
  float scale = 1.0f;  // a folded norm's scale, applied to the angles once the loads are out
  const int64_t cache_row = static_cast<int64_t>(slot) * s.kv_dim;
  const int q_units = r.num_heads * units_per_head;
  const int total = (r.num_heads + r.num_kv_heads) * units_per_head;
  const uint4* v = reinterpret_cast<const uint4*>(s.v + t * s.row_stride);
  const int v_chunks = s.kv_dim / 8;
  // Chunks threadIdx.x + j * blockDim.x of v, loaded with q and k.
  uint4 v_early[kVChunksPerThread] = {};
#pragma unroll
  for (int j = 0; j < kVChunksPerThread; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (slot >= 0 && i < v_chunks) v_early[j] = v[i];
  }
  // Unit j of the token: q heads' units first, then k heads'; `head` counts within q or k.
  struct Unit {
    bool is_q;
    int head, i;  // pair indices i..i+3 of head `head`
    __nv_bfloat16* x;
  };
  const auto unit = [&](int j) {
    const bool is_q = j < q_units;
    const int jj = is_q ? j : j - q_units;
    const int head = jj / units_per_head, i = (jj % units_per_head) * 4;
    return Unit{is_q, head, i, (is_q ? r.q : r.k) + t * r.row_stride + head * r.head_dim + i};
  };
  for (int base = 0; base < total; base += kUnitsPerThread * blockDim.x) {
    uint2 lo[kUnitsPerThread], hi[kUnitsPerThread];
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int j = base + u * blockDim.x + threadIdx.x;
      if (j >= total) continue;
      const Unit un = unit(j);
      lo[u] = *reinterpret_cast<const uint2*>(un.x);
      hi[u] = *reinterpret_cast<const uint2*>(un.x + half);
    }
    if (base == 0) scale = ScaleAngles(r, t, s_cos, s_sin);  // uniform: every thread comes here
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int j = base + u * blockDim.x + threadIdx.x;
      if (j >= total) continue;
      const Unit un = unit(j);
      RotateBf16x4(lo[u], hi[u], s_cos + un.i, s_sin + un.i);
      *reinterpret_cast<uint2*>(un.x) = lo[u];
      *reinterpret_cast<uint2*>(un.x + half) = hi[u];
      if (!un.is_q && slot >= 0) {
        __nv_bfloat16* kc = s.k_cache + cache_row + un.head * r.head_dim + un.i;
        *reinterpret_cast<uint2*>(kc) = lo[u];
        *reinterpret_cast<uint2*>(kc + half) = hi[u];
      }
    }
  }
  if (slot < 0) return;
  uint4* vc = reinterpret_cast<uint4*>(s.v_cache + cache_row);
#pragma unroll
  for (int j = 0; j < kVChunksPerThread; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < v_chunks) vc[i] = r.norm.on() ? ScaleBf16x8(v_early[j], scale) : v_early[j];
  }
  for (int i = threadIdx.x + kVChunksPerThread * blockDim.x; i < v_chunks; i += blockDim.x) {
    vc[i] = r.norm.on() ? ScaleBf16x8(v[i], scale) : v[i];
  }
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
