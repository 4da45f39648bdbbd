#pragma once
// Device code shared by the two one-row GEMVs over large weights (gemv_rows.cu, gemv_slab.cu):
// which two weight rows make a unit of a launch, and what a unit's epilogue writes from the two
// rows' sums. Unit u: plain rows 2u and 2u + 1; SwiGLU feature u (gate row u, up row inter + u);
// RoPE rotation pair u (rows i and i + half of one q or k head) or, past the pairs, v features
// 2v and 2v + 1.

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/gemv_rows.h"
#include "kernels/norm_link.cuh"
#include "kernels/rope_math.cuh"

namespace rtgen::kernels {

struct RowsUnit {
  int row0 = 0, row1 = 0;  // weight rows
  int pair = -1;           // kRope: the rotation pair (h * half + i), -1 for a v unit
};

template <GemvRowsEpilogue kEpi>
__device__ __forceinline__ RowsUnit UnitRows(const GemvParams& p, const GemvRopeParams& r,
                                             int unit) {
  RowsUnit u;
  if constexpr (kEpi == GemvRowsEpilogue::kStore) {
    u.row0 = 2 * unit;
    u.row1 = min(2 * unit + 1, p.n - 1);  // a last odd row repeats (in bounds, not stored)
  } else if constexpr (kEpi == GemvRowsEpilogue::kSwiGlu) {
    u.row0 = unit;
    u.row1 = (p.n >> 1) + unit;
  } else {
    const int half = r.head_dim >> 1;
    const int pairs = (r.num_heads + r.num_kv_heads) * half;
    if (unit < pairs) {
      u.pair = unit;
      u.row0 = (unit / half) * r.head_dim + unit % half;
      u.row1 = u.row0 + half;
    } else {
      u.row0 = (r.num_heads + r.num_kv_heads) * r.head_dim + 2 * (unit - pairs);
      u.row1 = u.row0 + 1;
    }
  }
  return u;
}

// A norm producer's unit (gemv.h GemvNormLink; plain epilogue): joins its rows' features to the
// residual, given the residual's and the norm weight's values at its two rows (read by the
// caller), and returns their sum of squares in the slot's fixed point (NormSquaresFixed). A last
// odd unit joins its first row only.
__device__ __forceinline__ unsigned long long JoinUnit(const GemvParams& p, const RowsUnit& u,
                                                       int unit, float sum0, float sum1,
                                                       float res0, float res1, float weight0,
                                                       float weight1) {
  float sq = NormLinkJoin(p.link, u.row0, res0, weight0, sum0);
  if (2 * unit + 1 < p.n) sq += NormLinkJoin(p.link, u.row1, res1, weight1, sum1);
  return NormSquaresFixed(sq);
}

// Writes unit `unit`'s outputs from its two rows' sums. A norm producer writes no y: it returns
// JoinUnit's fixed-point squares, for the caller to add; otherwise 0.
template <GemvRowsEpilogue kEpi>
__device__ __forceinline__ unsigned long long StoreUnit(const GemvParams& p,
                                                        const GemvRopeParams& r,
                                                        const RowsUnit& u, int unit, float sum0,
                                                        float sum1, float c, float s,
                                                        int32_t slot) {
  if constexpr (kEpi == GemvRowsEpilogue::kStore) {
    if (p.link.sum_sq != nullptr) {
      const GemvNormLink& l = p.link;  // row1 is in bounds (a last odd unit repeats row0)
      return JoinUnit(p, u, unit, sum0, sum1, l.residual[u.row0], l.residual[u.row1],
                      l.weight[u.row0], l.weight[u.row1]);
    }
    const auto store = [&](int row, float v) {
      if (p.y_f32) {
        static_cast<float*>(p.y)[row] = v;
      } else {
        static_cast<__nv_bfloat16*>(p.y)[row] = __float2bfloat16(v);
      }
    };
    store(u.row0, sum0);
    if (2 * unit + 1 < p.n) store(u.row1, sum1);
  } else if constexpr (kEpi == GemvRowsEpilogue::kSwiGlu) {
    static_cast<__nv_bfloat16*>(p.y)[unit] = SiluTimes(RoundBf16(sum0), RoundBf16(sum1));
  } else {
    __nv_bfloat16* y = static_cast<__nv_bfloat16*>(p.y);
    const int half = r.head_dim >> 1, kv_dim = r.num_kv_heads * r.head_dim;
    const int q_dim = r.num_heads * r.head_dim;
    if (u.pair >= 0) {
      const RotatedPair rot = RotateHalf(RoundBf16(sum0), RoundBf16(sum1), c, s);
      y[u.row0] = rot.lo;
      y[u.row1] = rot.hi;
      const int head = u.pair / half;
      if (head >= r.num_heads && slot >= 0) {
        __nv_bfloat16* kc = r.k_cache + static_cast<int64_t>(slot) * kv_dim + u.row0 - q_dim;
        kc[0] = rot.lo;
        kc[half] = rot.hi;
      }
    } else {
      const __nv_bfloat16 v0 = __float2bfloat16(sum0), v1 = __float2bfloat16(sum1);
      y[u.row0] = v0;
      y[u.row1] = v1;
      if (slot >= 0) {
        __nv_bfloat16* vc =
            r.v_cache + static_cast<int64_t>(slot) * kv_dim + (u.row0 - q_dim - kv_dim);
        vc[0] = v0;
        vc[1] = v1;
      }
    }
  }
  return 0;
}

}  // namespace rtgen::kernels
