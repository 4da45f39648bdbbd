// The row-streaming decode GEMV (gemv_rows.h).
//
// Unit u of a launch is two weight rows handled by one warp: plain rows 2u and 2u + 1; SwiGLU
// feature u (gate row u, up row inter + u); RoPE rotation pair u (rows i and i + half of one q or
// k head) or, past the pairs, v features 2v and 2v + 1. Lane l takes the 16-byte chunks
// l, l + 32, ... of both rows, kUnroll chunks per group, the next group's loads issued before the
// current group's arithmetic; each chunk's 8 products go to two fp32 accumulators per row with
// explicit fused multiply-adds (elements 0-3 and 4-7), so every variant forms a row's sum the
// same way. A norm link (gemv.h GemvNormLink) changes only the epilogue: a producer joins its
// rounded products to the residual and writes the next norm's input and sum of squares instead of
// y; a consumer scales both sums by 1 / rms before its epilogue.

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/gemv_rows.h"
#include "kernels/gemv_rows_units.cuh"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/norm_link.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kWarps = 4;   // units per block
constexpr int kUnroll = 4;  // chunks per row per group: 2 * kUnroll 16-byte loads in flight

// Adds the 8 products of weight chunk w and input chunk x to (lo, hi).
__device__ __forceinline__ void Dot8(const uint4& w, const uint4& x, float* lo, float* hi) {
  float wf[8], xf[8];
  UnpackBf16x8(w, wf);
  UnpackBf16x8(x, xf);
#pragma unroll
  for (int e = 0; e < 4; ++e) *lo = __fmaf_rn(wf[e], xf[e], *lo);
#pragma unroll
  for (int e = 4; e < 8; ++e) *hi = __fmaf_rn(wf[e], xf[e], *hi);
}

// early_dependents: the RoPE variant lets its dependent (decode attention) start before the main
// loop, as the other variants do, instead of after it (GemvRowsRopeEarlyDependents).
template <GemvRowsEpilogue kEpi>
__global__ void __launch_bounds__(kWarps * 32)
    GemvRowsKernel(GemvParams p, GemvRopeParams r, int units, bool early_dependents) {
  RTGEN_TRACE_KERNEL(kGemvRows);
  constexpr bool kRope = kEpi == GemvRowsEpilogue::kRope;
  const int lane = threadIdx.x & 31;
  const int unit = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const bool active = unit < units;  // a warp past the units only waits (launch.h)
  const RowsUnit u = UnitRows<kEpi>(p, r, active ? unit : 0);
  const uint4* w0 = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(u.row0) * p.k) + lane;
  const uint4* w1 = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(u.row1) * p.k) + lane;
  const uint4* x = reinterpret_cast<const uint4*>(p.x) + lane;
  const int chunks = p.k >> 3;
  const int groups = (chunks + 32 * kUnroll - 1) / (32 * kUnroll);
  const auto load = [&](int grp, uint4(&a)[kUnroll], uint4(&b)[kUnroll]) {
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int j = grp * kUnroll + i;
      const bool ok = active && lane + 32 * j < chunks;
      a[i] = LoadStreamed16(w0 + 32 * j, ok);
      b[i] = LoadStreamed16(w1 + 32 * j, ok);
    }
  };
  // Before the PDL wait: the first group's weights, and RoPE's angle and slot (step arrays).
  uint4 a[kUnroll], b[kUnroll];
  load(0, a, b);
  float c = 1.0f, s = 0.0f;
  int32_t slot = -1;
  if constexpr (kRope) {
    if (active && lane == 0) {
      if (u.pair >= 0) RopeCosSin(r.positions[0], r.inv_freq[u.pair % (r.head_dim >> 1)], &c, &s);
      slot = r.slot_mapping[0];
    }
  }
  PdlWait();
  if (!kRope || early_dependents) PdlLaunchDependents();
  // The norm before this consumer's has been read by its own consumer, which has completed.
  if (p.link.zero_after != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *p.link.zero_after = 0;
  float s0 = 0.0f, s0h = 0.0f, s1 = 0.0f, s1h = 0.0f;
  for (int grp = 0; grp < groups; ++grp) {
    uint4 na[kUnroll], nb[kUnroll];
    if (grp + 1 < groups) load(grp + 1, na, nb);
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int j = grp * kUnroll + i;
      const uint4 xv = LoadCached16(x + 32 * j, active && lane + 32 * j < chunks);
      Dot8(a[i], xv, &s0, &s0h);
      Dot8(b[i], xv, &s1, &s1h);
    }
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) a[i] = na[i], b[i] = nb[i];
  }
  if (kRope && !early_dependents) PdlLaunchDependents();
  float sum0 = WarpSum(s0 + s0h), sum1 = WarpSum(s1 + s1h);
  if (p.link.scale_by != nullptr) {  // a norm consumer (gemv.h GemvNormLink)
    const float inv_rms = NormLinkInvRms(__ldcg(p.link.scale_by), p.link.eps, p.k);
    sum0 *= inv_rms;
    sum1 *= inv_rms;
  }
  if (active && lane == 0) {
    const unsigned long long squares = StoreUnit<kEpi>(p, r, u, unit, sum0, sum1, c, s, slot);
    if (kEpi == GemvRowsEpilogue::kStore && p.link.sum_sq != nullptr) {
      NormLinkAddFixed(p.link, 0, squares);
    }
  }
}

template <GemvRowsEpilogue kEpi>
cudaError_t Launch(const GemvParams& p, const GemvRopeParams& r, int units, bool pdl,
                   cudaStream_t stream) {
  const dim3 grid((units + kWarps - 1) / kWarps);
  return LaunchKernelPdlIf(pdl, GemvRowsKernel<kEpi>, grid, dim3(kWarps * 32), 0, stream, p, r,
                           units, GemvRowsRopeEarlyDependents());
}

}  // namespace

// The tensor-core RoPE GEMV lets decode attention start only after its main loop at most shapes
// (gemv.cu TcRopeReleasesEarly): that grid is about one block per SM, and placed while the GEMV
// fills the SMs its blocks land several on the few SMs with room and run slower (Llama-3.2-1B b1
// 0.871 -> 0.898 ms when started early in session 12, with 8-warp attention blocks). Here
// (Llama-3-8B's qkv at one row: its attention is 8 blocks) starting it before the main loop
// measured 4.131 / 4.109 -> 4.068 / 4.065 ms for 8B b1 (one call, alternating; that build also
// capped this kernel at 80 registers, which was not kept: alone it measured within noise).
// RTGEN_ROPE_EARLY_DEPENDENTS=0: after the main loop (A/B).
bool GemvRowsRopeEarlyDependents() {
  static const bool early = EnvOnUnlessZero("RTGEN_ROPE_EARLY_DEPENDENTS");
  return early;
}

int GemvRowsUnitCount(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi) {
  switch (epi) {
    case GemvRowsEpilogue::kStore: return (p.n + 1) / 2;
    case GemvRowsEpilogue::kSwiGlu: return p.n / 2;
    case GemvRowsEpilogue::kRope:
      return (r.num_heads + r.num_kv_heads) * (r.head_dim / 2) + r.num_kv_heads * r.head_dim / 2;
  }
  return 0;
}

cudaError_t LaunchGemvRows(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi,
                           bool pdl, cudaStream_t stream) {
  if (p.m != 1) return cudaErrorInvalidValue;
  const int units = GemvRowsUnitCount(p, r, epi);
  switch (epi) {
    case GemvRowsEpilogue::kStore:
      return Launch<GemvRowsEpilogue::kStore>(p, r, units, pdl, stream);
    case GemvRowsEpilogue::kSwiGlu:
      return Launch<GemvRowsEpilogue::kSwiGlu>(p, r, units, pdl, stream);
    case GemvRowsEpilogue::kRope:
      return Launch<GemvRowsEpilogue::kRope>(p, r, units, pdl, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rtgen::kernels
