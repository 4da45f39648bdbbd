// The MLP half of a one-token layer in one launch (see fused_mlp.h).
//
// Block layout (kThreads threads, F features from f0 = blockIdx.x * F), every weight in
// registers from before the PDL wait:
//   warp w holds gate/up rows [w * R, w * R + R), R = 2F / kWarps (row r < F: gate row f0 + r,
//   else up row inter + f0 + r - F); lane l the chunks l, l + 32, ... of those rows (16-byte
//   chunks), and the same chunks of x;
//   thread t holds down rows j = t, t + kThreads, ... (its F / 8 chunks from column f0).

#include <cstdint>

#include "kernels/aligned.h"
#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/fused_mlp.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/norm_link.cuh"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLaneChunks = kFusedMlpMaxHidden / 8 / 32;  // x chunks a lane holds
constexpr int kRowsPerThread = kFusedMlpMaxHidden / kThreads;  // down rows a thread holds

template <int F, bool kJoin>
__global__ void __launch_bounds__(kThreads) FusedMlpKernel(FusedMlpParams p) {
  RTGEN_TRACE_KERNEL(kFusedMlp);
  constexpr int kRows = 2 * F, kRowsPerWarp = kRows / kWarps, kDownChunks = F / 8;
  static_assert(kRows % kWarps == 0 && F % 8 == 0, "whole rows per warp, whole down chunks");
  __shared__ float s_sum[kRows];
  __shared__ __align__(16) __nv_bfloat16 s_act[F];
  __shared__ float s_scratch[32];
  __shared__ bool s_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hidden = p.hidden, chunks = hidden >> 3, inter_chunks = p.inter >> 3;
  const int f0 = blockIdx.x * F;

  // The block's weights, before the wait: they do not depend on the kernel before. Always
  // marked evict-first in L2 (the GEMVs do so for weights up to GemvEvictFirstMaxBytes, which
  // every shape this kernel takes is: hidden <= 1024).
  const uint64_t policy = EvictFirstPolicy();
  const uint4* w_gu = reinterpret_cast<const uint4*>(p.w_gate_up);
  uint4 wgu[kRowsPerWarp][kLaneChunks];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = warp * kRowsPerWarp + r;
    const int64_t w_row = row < F ? f0 + row : p.inter + f0 + (row - F);
#pragma unroll
    for (int u = 0; u < kLaneChunks; ++u) {
      const int c = lane + 32 * u;
      wgu[r][u] = LoadStreamedEvictFirst16(w_gu + w_row * chunks + c, c < chunks, policy);
    }
  }
  const uint4* w_dn = reinterpret_cast<const uint4*>(p.w_down) + (f0 >> 3);
  uint4 wdn[kRowsPerThread][kDownChunks];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
#pragma unroll
    for (int c = 0; c < kDownChunks; ++c) {
      wdn[i][c] = LoadStreamedEvictFirst16(w_dn + static_cast<int64_t>(j) * inter_chunks + c,
                                           j < hidden, policy);
    }
  }
  // Launched as a programmatic dependent (launch.h): x, the norm's sum and the residual are
  // written by the kernels before and read only after this wait.
  PdlWait();
  // The next launch may start now (its weights load under this kernel): releasing it only after
  // the products were added measured slower (SmolLM2-135M b1 0.466 -> 0.485-0.494 ms).
  PdlLaunchDependents();
  const unsigned long long link_sum = __ldcg(p.consumer.scale_by);
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.consumer.zero_after = 0;
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  uint4 xv[kLaneChunks];
#pragma unroll
  for (int u = 0; u < kLaneChunks; ++u) {
    xv[u] = LoadCached16(x + lane + 32 * u, lane + 32 * u < chunks);
  }
  // A producer's join inputs, loaded by every block now, while the rest runs: only the last
  // block to arrive uses them, and it cannot know that it is last until the end.
  float res[kRowsPerThread] = {}, norm_weight[kRowsPerThread] = {};
  if constexpr (kJoin) {
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int j = threadIdx.x + i * kThreads;
      if (j < hidden) {
        res[i] = __ldcg(p.producer.residual + j);
        norm_weight[i] = __ldg(p.producer.weight + j);
      }
    }
  }

  // gate / up rows: fp32 dot products (chunks past the row are zero on both sides), then the
  // consumer's scale and bf16, as GemvSiluMul.
  float acc[kRowsPerWarp] = {};
#pragma unroll
  for (int u = 0; u < kLaneChunks; ++u) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[r] = Dot8(wgu[r][u], xv[u], acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float v = WarpSum(acc[r]);
    if (lane == 0) s_sum[warp * kRowsPerWarp + r] = v;
  }
  __syncthreads();
  RTGEN_TRACE_MARK(0);  // gate and up sums in shared memory
  const float inv_rms = NormLinkInvRms(link_sum, p.consumer.eps, hidden);
  if (threadIdx.x < F) {
    const float gate = RoundBf16(s_sum[threadIdx.x] * inv_rms);
    const float up = RoundBf16(s_sum[F + threadIdx.x] * inv_rms);
    s_act[threadIdx.x] = SiluTimes(gate, up);
  }
  __syncthreads();

  // This block's share of every down product, added in fixed point.
  const uint4* act = reinterpret_cast<const uint4*>(s_act);
  unsigned long long* totals = reinterpret_cast<unsigned long long*>(p.pending);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
    if (j >= hidden) continue;
    float d = 0.0f;
#pragma unroll
    for (int c = 0; c < kDownChunks; ++c) d = Dot8(wdn[i][c], act[c], d);
    const long long fixed = __float2ll_rn(d * static_cast<float>(kPendingScale));
    atomicAdd(totals + j, static_cast<unsigned long long>(fixed));
  }
  RTGEN_TRACE_MARK(1);  // this block's products added
  // Without a producer the launch ends here: its completion publishes the totals.
  if constexpr (!kJoin) return;
  // The last block to arrive sees every block's additions (each fences before it counts).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(p.arrivals, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Every total read (and zeroed) at once, then joined: one memory round trip.
  unsigned long long total[kRowsPerThread];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
    total[i] = j < hidden ? atomicExch(totals + j, 0ull) : 0ull;
  }
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
    if (j >= hidden) continue;
    sq += NormLinkJoin(p.producer, j, res[i], norm_weight[i],
                       PendingProduct(static_cast<long long>(total[i])));
  }
  const float sum_sq = BlockSum(sq, s_scratch);  // a fixed tree: deterministic
  if (threadIdx.x == 0) {
    NormLinkAddSquares(p.producer, 0, sum_sq);
    *p.arrivals = 0;  // every block has counted: ready for the next launch
  }
}

template <int F>
cudaError_t LaunchFeatures(const FusedMlpParams& p, cudaStream_t stream) {
  const dim3 grid(p.inter / F), block(kThreads);
  return p.producer.sum_sq != nullptr
             ? LaunchKernelPdlIf(PdlEnabled(), FusedMlpKernel<F, true>, grid, block, 0, stream, p)
             : LaunchKernelPdlIf(PdlEnabled(), FusedMlpKernel<F, false>, grid, block, 0, stream, p);
}

int FeaturesOf(const FusedMlpParams& p) {
  return p.features == 0 ? FusedMlpDefaultFeatures() : p.features;
}

}  // namespace

int FusedMlpDefaultFeatures() {
  static const int features =
      EnvChoice("RTGEN_FUSED_MLP_FEATURES", {"16", "8"}, 0) == 1 ? 8 : 16;
  return features;
}

bool FusedMlpSupported(const FusedMlpParams& p) {
  const int f = FeaturesOf(p);
  const GemvNormLink& in = p.consumer;
  const GemvNormLink& out = p.producer;
  const bool producer_complete = out.producer_complete() && p.arrivals != nullptr;
  return (f == 8 || f == 16) && p.hidden > 0 && p.hidden % 8 == 0 &&
         p.hidden <= kFusedMlpMaxHidden && p.inter > 0 && p.inter % f == 0 &&
         p.x != nullptr && p.w_gate_up != nullptr && p.w_down != nullptr &&
         Aligned16(p.x) && Aligned16(p.w_gate_up) && Aligned16(p.w_down) &&
         in.scale_by != nullptr && in.zero_after != nullptr && in.zero_after != in.scale_by &&
         (!out.has_producer() || producer_complete) && p.pending != nullptr;
}

cudaError_t FusedMlp(FusedMlpParams p, cudaStream_t stream) {
  if (!FusedMlpSupported(p)) return cudaErrorInvalidValue;
  return FeaturesOf(p) == 8 ? LaunchFeatures<8>(p, stream) : LaunchFeatures<16>(p, stream);
}

}  // namespace rtgen::kernels
