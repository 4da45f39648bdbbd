// The slab-streaming one-row GEMV (gemv_slab.h).
//
// A block owns units [u0, u0 + nb) and streams 2 nb weight rows in slab order: position s < 2 nb
// is row 2 u0 + s for the plain epilogue (consecutive rows), else the first row of unit u0 + s
// for s < nb and the second row of unit u0 + s - nb after that (SwiGLU: the block's gate rows,
// then its up rows). Chunk q (16 bytes, 8 bf16) of the slab is chunk q % C of position q / C, C =
// k / 8; at step j warp w reads chunks j T U + w 32 U + 32 u + lane (u < U): the block's step is
// T U chunks of its slab, each warp's 32 U of them in one row.

#include <cstdint>

#include "kernels/aligned.h"
#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/gemv_rows_units.cuh"
#include "kernels/gemv_slab.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

constexpr int kUnroll = 4;           // 16-byte loads in flight per thread
constexpr int kSpan = 32 * kUnroll;  // chunks of one row a warp reads per step
constexpr size_t kMaxSmemBytes = 100 * 1024;  // per block: x, then the spans' sums

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 2;  // 2 x 512 threads at <= 64 registers: the whole register file
constexpr int kStep = kThreads * kUnroll;  // chunks of a block's slab per step

int NumSms() {
  static const int sms = [] {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 0;
    }
    return count;
  }();
  return sms;
}

struct SlabPlan {
  int units = 0;
  int units_per_block = 0;
  int blocks = 0;
  size_t smem = 0;  // bytes per block
};

SlabPlan PlanSlab(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi) {
  SlabPlan plan;
  plan.units = GemvRowsUnitCount(p, r, epi);
  const int most = kBlocksPerSm * NumSms();
  if (plan.units <= 0 || most <= 0) return plan;
  plan.units_per_block = (plan.units + most - 1) / most;
  plan.blocks = (plan.units + plan.units_per_block - 1) / plan.units_per_block;
  const int spans = p.k / (8 * kSpan);
  plan.smem = size_t{2} * p.k + sizeof(float) * 2 * plan.units_per_block * spans;
  return plan;
}

// The weight row at slab position s of a block with units [u0, u0 + nb) (see the top).
template <GemvRowsEpilogue kEpi>
__device__ __forceinline__ int SlabRow(const GemvParams& p, const GemvRopeParams& r, int u0,
                                       int nb, int s) {
  if constexpr (kEpi == GemvRowsEpilogue::kStore) {
    return min(2 * u0 + s, p.n - 1);  // a last odd row repeats (in bounds, not stored)
  } else {
    const RowsUnit u = UnitRows<kEpi>(p, r, u0 + (s < nb ? s : s - nb));
    return s < nb ? u.row0 : u.row1;
  }
}

// The slab positions of unit u0 + i's two rows.
template <GemvRowsEpilogue kEpi>
__device__ __forceinline__ int2 SlabPositions(int i, int nb) {
  if constexpr (kEpi == GemvRowsEpilogue::kStore) {
    return make_int2(2 * i, 2 * i + 1);
  } else {
    return make_int2(i, nb + i);
  }
}

template <GemvRowsEpilogue kEpi>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    GemvSlabKernel(GemvParams p, GemvRopeParams r, int units, int units_per_block,
                   bool early_dependents) {
  RTGEN_TRACE_KERNEL(kGemvRows);  // traced under the row-streaming kernel's tag
  constexpr bool kRope = kEpi == GemvRowsEpilogue::kRope;
  extern __shared__ __align__(16) uint8_t smem[];
  const int u0 = blockIdx.x * units_per_block;
  const int nb = max(0, min(units, u0 + units_per_block) - u0);
  const int chunks = p.k >> 3, spans = chunks / kSpan;
  const int64_t slab_chunks = int64_t{2 * nb} * chunks;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint4* w = reinterpret_cast<const uint4*>(p.w);
  // Step j's loads of this warp; past the slab predicated off (no access).
  const auto load = [&](int64_t j, uint4(&v)[kUnroll]) {
    const int64_t q0 = j * kStep + warp * kSpan;
    const bool in = q0 < slab_chunks;
    const int pos = in ? static_cast<int>(q0 / chunks) : 0;
    const int c0 = in ? static_cast<int>(q0 % chunks) : 0;
    const uint4* src =
        w + int64_t{in ? SlabRow<kEpi>(p, r, u0, nb, pos) : 0} * chunks + c0 + lane;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = LoadStreamed16(src + 32 * u, in);
  };
  // Before the PDL wait: the first step's weights, and RoPE's angle and slot for this thread's
  // unit (thread i: unit u0 + i; nb <= kThreads, GemvSlabFits).
  uint4 cur[kUnroll];
  load(0, cur);
  float c = 1.0f, s = 0.0f;
  int32_t slot = -1;
  if constexpr (kRope) {
    if (static_cast<int>(threadIdx.x) < nb) {
      const RowsUnit u = UnitRows<kEpi>(p, r, u0 + threadIdx.x);
      if (u.pair >= 0) RopeCosSin(r.positions[0], r.inv_freq[u.pair % (r.head_dim >> 1)], &c, &s);
      slot = r.slot_mapping[0];
    }
  }
  PdlWait();
  if (!kRope || early_dependents) PdlLaunchDependents();
  // The norm before this consumer's has been read by its own consumer, which has completed.
  if (p.link.zero_after != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *p.link.zero_after = 0;
  // What the epilogue reads that earlier kernels wrote, requested now so that it arrives during
  // the stream instead of after it: a consumer's sum of squares; a producer's residual values
  // and norm weights of this thread's unit (thread i: unit u0 + i; nb <= kThreads there).
  const GemvNormLink& link = p.link;
  const bool producer = kEpi == GemvRowsEpilogue::kStore && link.sum_sq != nullptr;
  const unsigned long long link_sum = link.scale_by != nullptr ? __ldcg(link.scale_by) : 0;
  const bool owns_unit = static_cast<int>(threadIdx.x) < nb;
  const RowsUnit unit = UnitRows<kEpi>(p, r, u0 + (owns_unit ? threadIdx.x : 0));
  float res0 = 0.0f, res1 = 0.0f, weight0 = 0.0f, weight1 = 0.0f;
  if (producer && owns_unit) {
    res0 = link.residual[unit.row0], res1 = link.residual[unit.row1];
    weight0 = link.weight[unit.row0], weight1 = link.weight[unit.row1];
  }
  uint4* s_x = reinterpret_cast<uint4*>(smem);
  float* s_sums = reinterpret_cast<float*>(smem + size_t{2} * p.k);  // [2 nb][spans]
  for (int i = threadIdx.x; i < chunks; i += kThreads) {
    s_x[i] = __ldg(reinterpret_cast<const uint4*>(p.x) + i);
  }
  __syncthreads();
  const int64_t steps = (slab_chunks + kStep - 1) / kStep;
  for (int64_t j = 0; j < steps; ++j) {
    uint4 next[kUnroll];
    load(j + 1, next);
    const int64_t q0 = j * kStep + warp * kSpan;
    if (q0 < slab_chunks) {  // warp-uniform: a span is all in or all out (chunks % kSpan == 0)
      const int pos = static_cast<int>(q0 / chunks), c0 = static_cast<int>(q0 % chunks);
      float acc[2] = {0.0f, 0.0f};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc[u & 1] = Dot8(cur[u], s_x[c0 + 32 * u + lane], acc[u & 1]);
      }
      const float sum = WarpSum(acc[0] + acc[1]);
      if (lane == 0) s_sums[pos * spans + c0 / kSpan] = sum;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) cur[u] = next[u];
  }
  if (kRope && !early_dependents) PdlLaunchDependents();
  __syncthreads();
  const float inv_rms = link.scale_by != nullptr  // a norm consumer (gemv.h GemvNormLink)
                            ? NormLinkInvRms(link_sum, link.eps, p.k)
                            : 1.0f;
  const auto row_sum = [&](int pos) {
    float total = 0.0f;
    for (int g = 0; g < spans; ++g) total += s_sums[pos * spans + g];
    return link.scale_by != nullptr ? total * inv_rms : total;
  };
  if (producer) {
    // The unit's join with the operands read above; the squares summed over the block first
    // (exact in fixed point), so that one atomic a block, not one a unit, meets the others at
    // the slot, all at the end of the launch.
    unsigned long long squares = 0;
    if (owns_unit) {
      const int2 at = SlabPositions<kEpi>(threadIdx.x, nb);
      squares = JoinUnit(p, unit, u0 + static_cast<int>(threadIdx.x), row_sum(at.x),
                         row_sum(at.y), res0, res1, weight0, weight1);
    }
    __shared__ unsigned long long scratch[32];
    squares = BlockSum(squares, scratch);  // integers: exact in any order
    if (threadIdx.x == 0) NormLinkAddFixed(link, 0, squares);
    return;
  }
  for (int i = threadIdx.x; i < nb; i += kThreads) {
    const int2 at = SlabPositions<kEpi>(i, nb);
    StoreUnit<kEpi>(p, r, UnitRows<kEpi>(p, r, u0 + i), u0 + i, row_sum(at.x), row_sum(at.y), c,
                    s, slot);
  }
}

template <GemvRowsEpilogue kEpi>
cudaError_t Launch(const GemvParams& p, const GemvRopeParams& r, bool pdl, cudaStream_t stream) {
  const SlabPlan plan = PlanSlab(p, r, kEpi);
  // Past the 48 KiB a launch gets without asking (k > ~24K): raised per call, since the limit
  // is a setting of the current device.
  constexpr size_t kDefaultSmemBytes = 48 * 1024;
  if (plan.smem > kDefaultSmemBytes) {
    const cudaError_t attr =
        cudaFuncSetAttribute(GemvSlabKernel<kEpi>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxSmemBytes));
    if (attr != cudaSuccess) return attr;
  }
  return LaunchKernelPdlIf(pdl, GemvSlabKernel<kEpi>, dim3(plan.blocks), dim3(kThreads),
                           plan.smem, stream, p, r, plan.units, plan.units_per_block,
                           GemvRowsRopeEarlyDependents());
}

}  // namespace

bool GemvSlabFits(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi) {
  if (p.m != 1 || p.link.pending != nullptr || p.link.rebuild.on() || p.k <= 0 ||
      p.k % (8 * kSpan) != 0 || !Aligned16(p.x) || !Aligned16(p.w)) {
    return false;
  }
  const SlabPlan plan = PlanSlab(p, r, epi);
  // RoPE and a norm producer: each thread holds its unit's angle or operands from early on, so
  // a block has <= threads units.
  const bool one_unit_a_thread = epi == GemvRowsEpilogue::kRope || p.link.sum_sq != nullptr;
  return plan.blocks > 0 && plan.smem <= kMaxSmemBytes &&
         (!one_unit_a_thread || plan.units_per_block <= kThreads);
}

bool GemvSlabByDefault(const GemvParams& p) {
  // 0: never (default), 1: k >= 4096, 2: any k that fits
  static const int mode = EnvChoice("RTGEN_GEMV_SLAB", {"0", "1", "all"}, 0);
  constexpr int kMinK = 4096;  // alone, at k = 2048 level or slower (gemv_slab.h)
  return mode != 0 && (mode == 2 || p.k >= kMinK) &&
         GemvSlabFits(p, {}, GemvRowsEpilogue::kStore);
}

cudaError_t LaunchGemvSlab(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi,
                           bool pdl, cudaStream_t stream) {
  if (!GemvSlabFits(p, r, epi)) return cudaErrorInvalidValue;
  switch (epi) {
    case GemvRowsEpilogue::kStore: return Launch<GemvRowsEpilogue::kStore>(p, r, pdl, stream);
    case GemvRowsEpilogue::kSwiGlu: return Launch<GemvRowsEpilogue::kSwiGlu>(p, r, pdl, stream);
    case GemvRowsEpilogue::kRope: return Launch<GemvRowsEpilogue::kRope>(p, r, pdl, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rtgen::kernels
