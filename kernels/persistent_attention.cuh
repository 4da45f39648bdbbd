#pragma once
// The attention phase of the persistent batch-1 decode kernel (persistent_decode.h): one block
// per (q head, key partition). Device code only.
//
// The partition's first keys are loaded before the block waits for this step's q: they come
// from the paged cache, written by earlier steps. The new token's k and v are not in the cache
// for this launch's readers; they come from the q/k/v words like q. Each warp takes 16-key
// passes (two lanes per key, each half the head's dims; then each lane owns head_dim/32 output
// dims over the pass's V rows) with an online softmax in base 2; the block merges its warps in
// warp order and hands on (unnormalised output, max, sum) as flagged words.

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device_utils.cuh"
#include "kernels/flagged_words.cuh"
#include "kernels/persistent_layout.cuh"

namespace rtgen::kernels::persistent {

// The step's key partitions (the same in every block).
struct KeyParts {
  int ctx = 0;    // keys, the new token's included; 0: a zero attention row
  int parts = 1;  // partitions per q head
  int keys = 0;   // keys per partition, a multiple of 16
  __device__ KeyParts(int context, int max_parts, int keys_per_part) {
    ctx = max(context, 0);
    if (ctx == 0) return;
    const int want = min(max_parts, (ctx + keys_per_part - 1) / keys_per_part);
    keys = ((ctx + want - 1) / want + 15) / 16 * 16;
    parts = (ctx + keys - 1) / keys;
  }
};

struct AttentionInputs {
  const __nv_bfloat16* k_cache;  // this layer's pool
  const __nv_bfloat16* v_cache;
  const int32_t* table;          // shared-memory copy of the block table (first kTableCache)
  const int32_t* block_table;    // row 0 in global memory
  bool table_cached;             // every entry the context needs is in `table`
  int block_size;
  const uint64_t* qkv_words;     // this layer's q | k | v words
  uint64_t* att_words;           // this layer's partial words
  float q_scale;                 // softmax scale × log2(e)
};

// scratch: fp32 [2 head_dim + kWarps (head_dim + 2)]. on_q(): called once q (and the new k, v)
// are in (a trace point).
template <int HD, typename OnQ>
__device__ void AttentionBlock(const Dims& d, const KeyParts& kp, int head, int part,
                               const AttentionInputs& in, uint32_t flag, float* scratch,
                               OnQ on_q) {
  constexpr int kDpl = HD / 32;         // output dims per lane
  constexpr int kHalfChunks = HD / 16;  // 16-byte chunks in half a head row
  using VRaw = std::conditional_t<kDpl == 2, uint32_t, uint2>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane & 1;
  const int g = head / (d.heads / d.kv_heads);
  const int begin = part * kp.keys, end = min(kp.ctx, begin + kp.keys);
  const int passes = (end - begin + 15) / 16;
  const bool holds_new = kp.ctx > 0 && end == kp.ctx;  // this partition holds key ctx - 1
  float* s_q = scratch;                                   // [HD], scaled
  __nv_bfloat16* s_k = reinterpret_cast<__nv_bfloat16*>(scratch + HD);  // [HD]
  __nv_bfloat16* s_v = s_k + HD;                          // [HD]
  float* s_m = scratch + 2 * HD;                          // [kWarps]
  float* s_l = s_m + kWarps;                              // [kWarps]
  float* s_acc = s_l + kWarps;                            // [kWarps][HD]

  uint4 kr[kHalfChunks];
  VRaw vr[16];
  bool valid = false;
  int pass_keys = 0, new_key = -1;  // new_key: the new token's index in the pass, or -1
  // Pass s: keys begin + 16 s + [0, 16). The new token's k and v are read from s_k / s_v
  // when `with_new`; else they read as zeros, for PatchNewKey once s_k / s_v are filled.
  auto load = [&](int s, bool with_new) {
    const int t0 = begin + s * 16, t = t0 + (lane >> 1);
    valid = t < end;
    pass_keys = min(16, end - t0);
    new_key = kp.ctx - 1 - t0 < pass_keys && kp.ctx - 1 >= t0 ? kp.ctx - 1 - t0 : -1;
    const __nv_bfloat16* krow = nullptr;
    const __nv_bfloat16* vrow = nullptr;
    if (valid && t == kp.ctx - 1) {
      if (with_new) {
        krow = s_k;
        vrow = s_v;
      }
    } else if (valid) {
      const int j = t / in.block_size;
      const int blk = in.table_cached ? in.table[j] : in.block_table[j];
      const int64_t row =
          (int64_t{blk} * in.block_size + t % in.block_size) * d.kv_dim + int64_t{g} * HD;
      krow = in.k_cache + row;
      vrow = in.v_cache + row;
    }
    const uint4* k4 = reinterpret_cast<const uint4*>(krow) + half * kHalfChunks;
#pragma unroll
    for (int j = 0; j < kHalfChunks; ++j) kr[j] = krow ? k4[j] : make_uint4(0, 0, 0, 0);
    const auto vbits = reinterpret_cast<unsigned long long>(vrow);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const auto vj = reinterpret_cast<const __nv_bfloat16*>(__shfl_sync(kFullMask, vbits, 2 * j));
      vr[j] = j < pass_keys && vj ? *reinterpret_cast<const VRaw*>(vj + lane * kDpl) : VRaw{};
    }
  };
  const int first = warp;
  if (first < passes) load(first, false);

  // This step's q (every partition) and new k, v (the partition that holds the new token).
  const int t = threadIdx.x;
  if (t < HD / 2) {
    const uint32_t u = AwaitWord(in.qkv_words, head * HD / 2 + t, flag);
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
    s_q[2 * t] = f.x * in.q_scale;
    s_q[2 * t + 1] = f.y * in.q_scale;
  } else if (holds_new && t < HD) {
    reinterpret_cast<uint32_t*>(s_k)[t - HD / 2] =
        AwaitWord(in.qkv_words, (d.q_dim + g * HD) / 2 + t - HD / 2, flag);
  } else if (holds_new && t < 3 * HD / 2) {
    reinterpret_cast<uint32_t*>(s_v)[t - HD] =
        AwaitWord(in.qkv_words, (d.q_dim + d.kv_dim + g * HD) / 2 + t - HD, flag);
  }
  __syncthreads();
  on_q();
  if (first < passes && new_key >= 0) {  // the first pass holds the new token: patch it in
    if (lane >> 1 == new_key) {
      const uint4* k4 = reinterpret_cast<const uint4*>(s_k) + half * kHalfChunks;
#pragma unroll
      for (int j = 0; j < kHalfChunks; ++j) kr[j] = k4[j];
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      if (j == new_key) vr[j] = *reinterpret_cast<const VRaw*>(s_v + lane * kDpl);
    }
  }

  float m = -INFINITY, l = 0.0f, acc[kDpl];
#pragma unroll
  for (int i = 0; i < kDpl; ++i) acc[i] = 0.0f;
  for (int s = first; s < passes; s += kWarps) {
    if (s != first) load(s, true);
    const float* q = s_q + half * (HD / 2);
    float score = 0.0f;
#pragma unroll
    for (int j = 0; j < kHalfChunks; ++j) {
      float kf[8];
      UnpackBf16x8(kr[j], kf);
#pragma unroll
      for (int e = 0; e < 8; ++e) score = fmaf(q[j * 8 + e], kf[e], score);
    }
    score += __shfl_xor_sync(kFullMask, score, 1);  // both lanes of a key hold its score
    const float m_new = fmaxf(m, WarpMax(valid ? score : -INFINITY));
    const float corr = exp2f(m - m_new);
    const float pr = valid ? exp2f(score - m_new) : 0.0f;
    l = l * corr + WarpSum(half == 0 ? pr : 0.0f);
#pragma unroll
    for (int i = 0; i < kDpl; ++i) acc[i] *= corr;
    m = m_new;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float pj = __shfl_sync(kFullMask, pr, 2 * j);  // 0 for keys past the partition
      const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(&vr[j]);
#pragma unroll
      for (int i = 0; i < kDpl / 2; ++i) {
        const float2 f = __bfloat1622float2(v2[i]);
        acc[2 * i] = fmaf(pj, f.x, acc[2 * i]);
        acc[2 * i + 1] = fmaf(pj, f.y, acc[2 * i + 1]);
      }
    }
  }

  // Merge the warps (warp order) and hand on the partition's output, max and sum.
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kDpl; ++i) s_acc[warp * HD + lane * kDpl + i] = acc[i];
  __syncthreads();
  if (t < HD) {
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
    float a = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = s_m[w] == -INFINITY ? 0.0f : exp2f(s_m[w] - mx);
      a = fmaf(e, s_acc[w * HD + t], a);
      sum = fmaf(e, s_l[w], sum);
    }
    uint64_t* out = in.att_words + (int64_t{head} * kp.parts + part) * (HD + 2);
    StoreWord(out + t, __float_as_uint(a), flag);
    if (t == 0) {
      StoreWord(out + HD, __float_as_uint(mx), flag);
      StoreWord(out + HD + 1, __float_as_uint(sum), flag);
    }
  }
}

}  // namespace rtgen::kernels::persistent
