#pragma once
// Small device helpers shared by the kernels (warp/block reductions, predicated 16-byte loads).
// Device code only.

#include <cuda_bf16.h>

#include <cstdint>

namespace rtgen::kernels {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;  // softmax scores are kept in base 2: x * log2(e)

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// The GPU's global timer, ns (one clock for every SM).
__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A counter between grids: acquire load / release add at GPU scope. A producer's threads store,
// meet at a barrier, then one adds with release (cumulative: it releases the other threads'
// stores ordered before it by the barrier); a consumer's thread acquires the count, then its
// threads meet at a barrier before they read. No full fence needed.
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void AddRelease(uint32_t* p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Marks `v` as written here, so that nothing computed from it is placed before this point: a
// load whose value is first used after ArrivesHere(value) stays in flight until then, instead
// of being waited for where the compiler would convert it (often right after the load, which
// holds up every load issued after it by a round trip to L2).
__device__ __forceinline__ void ArrivesHere(float& v) { asm volatile("mov.b32 %0, %0;" : "+f"(v)); }
__device__ __forceinline__ void ArrivesHere(long long& v) {
  asm volatile("mov.b64 %0, %0;" : "+l"(v));
}
__device__ __forceinline__ void ArrivesHere(unsigned long long& v) {
  asm volatile("mov.b64 %0, %0;" : "+l"(v));
}

// The L2 cache policy that marks lines evict-first (weights read once per step), for loads and
// copies with an L2::cache_hint (sm_90 has no plain evict-first qualifier for 16-byte loads).
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 values. Must be
// called by every thread of the block (contains barriers).
template <typename T>
__device__ __forceinline__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < num_warps ? scratch[lane] : T(0);
  return WarpSum(total);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < num_warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

// exp2(a - b) that is 0 when a is -inf (an empty softmax state), never NaN: the factor that
// rescales a state with base-2 max a to a larger max b.
__device__ __forceinline__ float Rescale(float a, float b) {
  return a == -INFINITY ? 0.0f : exp2f(a - b);
}

// x rounded to bf16 and back: what a bf16 store and reload would give.
__device__ __forceinline__ float RoundBf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

// The 8 bf16 of a 16-byte load, as fp32 (exact).
__device__ __forceinline__ void UnpackBf16x8(const uint4& u, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// acc + the dot product of two 16-byte groups of 8 bf16, in element order (fp32 multiply-adds).
__device__ __forceinline__ float Dot8(uint4 w, uint4 x, float acc) {
  float a[8], b[8];
  UnpackBf16x8(w, a);
  UnpackBf16x8(x, b);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(a[i], b[i], acc);
  return acc;
}

// SwiGLU's activation silu(g) * u in fp32, rounded to bf16: one expression for the SiLU·mul
// kernels and the fused GEMV epilogues, so every path gives the same bits.
__device__ __forceinline__ __nv_bfloat16 SiluTimes(float g, float u) {
  return __float2bfloat16(g / (1.0f + expf(-g)) * u);
}

// Predicated 16-byte loads of read-only data, zero when !pred (no access is made then). The asm
// is volatile so the compiler keeps every load where it is written: a group of loads stays ahead
// of the arithmetic that uses it (all of them in flight at once) instead of each sinking next to
// its use. LoadStreamed16 is for data used once (weights): it skips L1 allocation, so data that
// many blocks re-read (input rows) stays in L1. LoadCached16 allocates in L1 as usual.
#define RTGEN_PREDICATED_LD16(QUALIFIERS, V, P, PRED)                                     \
  asm volatile(                                                                          \
      "{\n\t.reg .pred p;\n\t"                                                           \
      "setp.ne.b32 p, %5, 0;\n\t"                                                        \
      "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"         \
      "@p ld.global.nc" QUALIFIERS ".v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"                \
      : "=r"(V.x), "=r"(V.y), "=r"(V.z), "=r"(V.w)                                       \
      : "l"(P), "r"(static_cast<int>(PRED)))

__device__ __forceinline__ uint4 LoadStreamed16(const uint4* p, bool pred) {
  uint4 v;
  RTGEN_PREDICATED_LD16(".L1::no_allocate", v, p, pred);
  return v;
}

// LoadStreamed16 with the line marked evict-first in L2 by `policy` (EvictFirstPolicy): weights
// read once per step, so that they do not push out what the step reads again (the KV cache).
__device__ __forceinline__ uint4 LoadStreamedEvictFirst16(const uint4* p, bool pred,
                                                          uint64_t policy) {
  uint4 v;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %5, 0;\n\t"
      "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
      "@p ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %6;\n\t}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(static_cast<int>(pred)), "l"(policy));
  return v;
}

__device__ __forceinline__ uint4 LoadCached16(const uint4* p, bool pred) {
  uint4 v;
  RTGEN_PREDICATED_LD16("", v, p, pred);
  return v;
}
#undef RTGEN_PREDICATED_LD16

// Asynchronous 16-byte copy global -> shared (sm_80+; through L2 only, no L1 allocation); when
// !valid nothing is read and the 16 bytes are zero-filled. A copy is visible to its own thread
// after CpAsyncWait, to the rest of the block after a barrier that follows that wait.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}

// Closes this thread's current group of copies (an empty group is allowed).
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most kPending of this thread's most recent groups are still in flight (groups
// complete in commit order, so every older one has landed).
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace rtgen::kernels
