#include "kernels/device_utils.cuh"
#include "kernels/embedding.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

// The vocabulary id of token t: a pending id -1 - r is the previous step's sample of row r.
__device__ __forceinline__ int32_t TokenId(const EmbeddingParams& p, int t) {
  const int32_t id = p.token_ids[t];
  return id < 0 && p.pending_tokens != nullptr ? p.pending_tokens[-1 - id] : id;
}

// Vector path (hidden % 8 == 0, hidden <= kVecMaxHidden): the table row (weights, written by no
// kernel) is loaded before the PDL wait, 16 bytes per load, all loads of a thread at once.
constexpr int kThreads = 256;
constexpr int kVecPerThread = 4;
constexpr int kVecMaxHidden = kThreads * kVecPerThread * 8;

__global__ void __launch_bounds__(kThreads) EmbeddingVecKernel(EmbeddingParams p) {
  RTGEN_TRACE_KERNEL(kEmbedding);
  const int t = blockIdx.x;
  const int32_t id = TokenId(p, t);
  const bool valid = id >= 0 && id < p.vocab;
  const int n8 = p.hidden / 8;
  const uint4* row = reinterpret_cast<const uint4*>(p.table + static_cast<int64_t>(valid ? id : 0) *
                                                                p.hidden);
  uint4 v[kVecPerThread];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    v[j] = valid && c < n8 ? row[c] : make_uint4(0, 0, 0, 0);
  }
  PdlWait();  // out (the residual stream) may still be read by the previous step's kernels
  PdlLaunchDependents();
  if (threadIdx.x == 0 && p.resolved_ids != nullptr) p.resolved_ids[t] = id;
  if (p.out16 != nullptr) {
    uint4* out16 = reinterpret_cast<uint4*>(p.out16 + static_cast<int64_t>(t) * p.hidden);
#pragma unroll
    for (int j = 0; j < kVecPerThread; ++j) {
      const int c = threadIdx.x + j * kThreads;
      if (c < n8) out16[c] = v[j];  // zeros for an invalid id
    }
    return;
  }
  float4* out = reinterpret_cast<float4*>(p.out + static_cast<int64_t>(t) * p.hidden);
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= n8) continue;
    float f[8];
    UnpackBf16x8(v[j], f);
    out[2 * c] = make_float4(f[0], f[1], f[2], f[3]);  // zeros for an invalid id
    out[2 * c + 1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

// Any hidden size.
__global__ void EmbeddingKernel(EmbeddingParams p) {
  RTGEN_TRACE_KERNEL(kEmbedding);
  PdlWait();  // out (the residual stream) may still be read by the previous step's kernels
  PdlLaunchDependents();
  const int t = blockIdx.x;
  const int32_t id = TokenId(p, t);
  if (threadIdx.x == 0 && p.resolved_ids != nullptr) p.resolved_ids[t] = id;
  const bool valid = id >= 0 && id < p.vocab;
  const __nv_bfloat16* row = p.table + static_cast<int64_t>(valid ? id : 0) * p.hidden;
  if (p.out16 != nullptr) {
    __nv_bfloat16* out16 = p.out16 + static_cast<int64_t>(t) * p.hidden;
    for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
      out16[i] = valid ? row[i] : __float2bfloat16(0.0f);
    }
    return;
  }
  float* out = p.out + static_cast<int64_t>(t) * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    out[i] = valid ? __bfloat162float(row[i]) : 0.0f;
  }
}

}  // namespace

cudaError_t Embedding(EmbeddingParams p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return cudaSuccess;
  const bool pdl = PdlEnabled() && !p.plain_launch;
  if (p.hidden % 8 == 0 && p.hidden <= kVecMaxHidden) {
    return LaunchKernelPdlIf(pdl, EmbeddingVecKernel, p.num_tokens, kThreads, 0, stream, p);
  }
  return LaunchKernelPdlIf(pdl, EmbeddingKernel, p.num_tokens, kThreads, 0, stream, p);
}

}  // namespace rtgen::kernels
