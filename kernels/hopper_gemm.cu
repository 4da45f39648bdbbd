#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstring>

#include "kernels/aligned.h"
#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/hopper_code.h"
#include "kernels/hopper_gemm.h"
#include "kernels/hopper_ptx.cuh"
#include "kernels/launch.h"

namespace rtgen::kernels {
namespace {

constexpr int kBlockK = 64;                // bf16 per k-block: one 128-byte swizzled row
constexpr int kRows = kHopperGemmMaxRows;  // wgmma's M: x's rows, zero-filled past m
constexpr int kConsumers = 128;            // one warpgroup multiplies
constexpr int kThreads = kConsumers + 32;  // and one warp copies
constexpr int kStageBudget = 200 * 1024;   // shared-memory bytes of a CTA's stages
constexpr int kMaxAcc = kRows * 256 / kConsumers;

template <int kTileN>
struct Tile {
  static constexpr int kHalves = kTileN / 128;  // m64n128 multiplies per k16 step
  static constexpr int kABytes = kRows * kBlockK * 2;
  static constexpr int kBBytes = kTileN * kBlockK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;  // a multiple of 1024
  static constexpr int kStages = kStageBudget / kStageBytes;
  static constexpr int kAcc = kRows * kTileN / kConsumers;  // fp32 accumulators per thread
  // Stages (1024-byte aligned inside: up to 1024 bytes of slack), full and empty barriers.
  static constexpr size_t kSmemBytes =
      1024 + size_t{kStages} * kStageBytes + 2 * kStages * sizeof(uint64_t);
};

struct Args {
  CUtensorMap x_map;  // x [m, k], box 64 x 64
  CUtensorMap w_map;  // w [n, k], box 64 x tile_n (64 x tile_n / 2 with silu_mul)
  const uint8_t* w_tiled;  // HopperGemmParams::w_tiled (then w_map is not read), or null
  void* y;
  float* partials;
  uint32_t* counters;
  int32_t m;
  int32_t y_cols;    // columns of y: n, or n / 2 with silu_mul
  int32_t up_row;    // silu_mul: up's first row in w (n / 2)
  int32_t k_blocks;  // k-blocks per output tile
  int64_t iters;     // output tiles * k_blocks, split evenly over the CTAs
};

#if RTGEN_HOPPER_DEVICE_CODE

// CTA c owns iterations [IterBegin(c), IterBegin(c + 1)). It works through its tiles from the
// last to the first, so of the CTAs sharing a tile the lower ones (for which it is the last tile)
// take it first and publish their shares, and the highest (the tile's last k-block is its first
// iteration) takes it last and sums them: the summing CTA waits only on lower CTAs, and a CTA
// publishes before it waits on anything. Assumed, not guaranteed by CUDA: the grid (one CTA per
// SM at most, and only one fits) becomes resident as SMs free up, lower indices no later than
// higher ones, as the hardware dispatches them; a CTA that never became resident while every
// resident one waited would hang the launch.
__device__ __forceinline__ int64_t IterBegin(const Args& a, int c) {
  return a.iters * c / gridDim.x;
}

// The CTA owning iteration `it`.
__device__ int CtaOf(const Args& a, int64_t it) {
  int c = static_cast<int>(it * gridDim.x / a.iters);
  while (c + 1 < static_cast<int>(gridDim.x) && IterBegin(a, c + 1) <= it) ++c;
  while (c > 0 && IterBegin(a, c) > it) --c;
  return c;
}

__device__ __forceinline__ void ConsumerBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

// The counter protocol of split tiles: a publisher's threads store their share, meet at a
// consumer barrier, then one thread adds with release semantics (AddRelease); the summing CTA's
// thread acquires the count (LoadAcquire), then its threads meet at a barrier before they read
// the shares (device_utils.cuh).

// The producer: one thread fills the stage ring in the CTA's processing order. The weight copies
// of the first stages go out before the PDL wait (weights are written by no kernel); x only after.
template <int kTileN, bool kSilu>
__device__ void Produce(const Args& a, uint8_t* smem, uint64_t* full, uint64_t* empty,
                        int64_t begin, int64_t end) {
  using T = Tile<kTileN>;
  hopper::PrefetchTensorMap(&a.w_map);
  hopper::PrefetchTensorMap(&a.x_map);
  const uint64_t stream_policy = EvictFirstPolicy();
  const auto load_w = [&](int s, int64_t it) {
    const int32_t tile = static_cast<int32_t>(it / a.k_blocks);
    const int32_t kx = static_cast<int32_t>(it % a.k_blocks) * kBlockK;
    uint8_t* b = smem + s * T::kStageBytes + T::kABytes;
    if (a.w_tiled != nullptr) {  // the same bytes, swizzled already, in one contiguous copy
      const int64_t box = static_cast<int64_t>(tile) * a.k_blocks + kx / kBlockK;
      hopper::BulkLoad(b, a.w_tiled + box * T::kBBytes, T::kBBytes, &full[s], stream_policy);
    } else if constexpr (kSilu) {  // gate rows, then the matching up rows
      const int32_t row = tile * (kTileN / 2);
      hopper::TmaLoad2d(b, &a.w_map, kx, row, &full[s], stream_policy);
      hopper::TmaLoad2d(b + kTileN / 2 * kBlockK * 2, &a.w_map, kx, a.up_row + row, &full[s],
                        stream_policy);
    } else {
      hopper::TmaLoad2d(b, &a.w_map, kx, tile * kTileN, &full[s], stream_policy);
    }
  };
  const auto load_x = [&](int s, int64_t it) {
    const int32_t kx = static_cast<int32_t>(it % a.k_blocks) * kBlockK;
    hopper::TmaLoad2dNoHint(smem + s * T::kStageBytes, &a.x_map, kx, 0, &full[s]);
  };
  const int64_t count = end - begin;
  int64_t deferred[T::kStages];  // iterations of the stages whose x waits for the PDL wait
  bool waited = false;
  int64_t i = 0;
  for (int32_t tile = static_cast<int32_t>((end - 1) / a.k_blocks);
       tile >= static_cast<int32_t>(begin / a.k_blocks); --tile) {
    const int64_t t0 = static_cast<int64_t>(tile) * a.k_blocks;
    const int64_t hi = end < t0 + a.k_blocks ? end : t0 + a.k_blocks;
    for (int64_t it = begin > t0 ? begin : t0; it < hi; ++it) {
      const int s = static_cast<int>(i % T::kStages);
      if (i >= T::kStages) {
        hopper::MbarWait(&empty[s], static_cast<uint32_t>((i / T::kStages - 1) & 1));
      }
      hopper::MbarArriveExpectTx(&full[s], T::kStageBytes);
      load_w(s, it);
      if (waited) {
        load_x(s, it);
      } else {
        deferred[s] = it;
      }
      ++i;
      if (!waited && (i == T::kStages || i == count)) {
        PdlWait();
        waited = true;
        for (int d = 0; d < i; ++d) load_x(d, deferred[d]);
      }
    }
  }
}

// The accumulator of flat column chunk j (8 columns; chunk j of half j / 16), element e (0, 1:
// row r0; 2, 3: row r0 + 8).
template <int kHalves>
__device__ __forceinline__ float& AccAt(float (&acc)[kHalves][64], int j, int e) {
  return acc[j / 16][4 * (j % 16) + e];
}

// Writes a finished tile: this thread's rows r0, r0 + 8 and columns 8 j + 2 (t % 4) + {0, 1}.
template <int kTileN, bool kSilu, bool kF32>
__device__ void StoreTile(const Args& a, int32_t tile, float (&v)[kTileN / 128][64]) {
  const int t = threadIdx.x;
  const int r0 = 16 * (t / 32) + (t % 32) / 4;
  const int c0 = 2 * (t % 4);
  if constexpr (kSilu) {
    // kHalf act columns per tile: gate in chunk j, up in chunk j + kHalf / 8.
    constexpr int kHalf = kTileN / 2;
    auto* y = static_cast<__nv_bfloat16*>(a.y);
#pragma unroll
    for (int j = 0; j < kHalf / 8; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = r0 + 8 * r;
        if (row >= a.m) continue;
        // Gate and up rounded to bf16 first, as the unfused path (Matmul, then SiluMul) does.
        const float g0 = __bfloat162float(__float2bfloat16(AccAt(v, j, 2 * r)));
        const float g1 = __bfloat162float(__float2bfloat16(AccAt(v, j, 2 * r + 1)));
        const float u0 = __bfloat162float(__float2bfloat16(AccAt(v, j + kHalf / 8, 2 * r)));
        const float u1 = __bfloat162float(__float2bfloat16(AccAt(v, j + kHalf / 8, 2 * r + 1)));
        __nv_bfloat162 out;
        out.x = SiluTimes(g0, u0);
        out.y = SiluTimes(g1, u1);
        const int col = tile * kHalf + 8 * j + c0;
        *reinterpret_cast<__nv_bfloat162*>(y + static_cast<int64_t>(row) * a.y_cols + col) = out;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      const int col = tile * kTileN + 8 * j + c0;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = r0 + 8 * r;
        if (row >= a.m || col >= a.y_cols) continue;
        const int64_t o = static_cast<int64_t>(row) * a.y_cols + col;
        if constexpr (kF32) {
          *reinterpret_cast<float2*>(static_cast<float*>(a.y) + o) =
              make_float2(AccAt(v, j, 2 * r), AccAt(v, j, 2 * r + 1));
        } else {
          *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + o) =
              __floats2bfloat162_rn(AccAt(v, j, 2 * r), AccAt(v, j, 2 * r + 1));
        }
      }
    }
  }
}

// CTA c's share of a tile it does not finish, in fragment order (coalesced float4s).
template <int kTileN>
__device__ __forceinline__ float4* ShareSlot(const Args& a, int c) {
  return reinterpret_cast<float4*>(a.partials) +
         static_cast<int64_t>(c) * (Tile<kTileN>::kAcc / 4) * kConsumers;
}

// A shared tile this CTA does not finish: its share goes to its slot (a CTA publishes at most
// one: only its last tile can end past its range), then the tile's counter counts it.
template <int kTileN>
__device__ void PublishShare(const Args& a, int32_t tile, float (&acc)[kTileN / 128][64]) {
  const int t = threadIdx.x;
  float4* slot = ShareSlot<kTileN>(a, blockIdx.x);
#pragma unroll
  for (int q = 0; q < Tile<kTileN>::kAcc / 4; ++q) {
    __stcg(slot + q * kConsumers + t, make_float4(AccAt(acc, q, 0), AccAt(acc, q, 1),
                                                  AccAt(acc, q, 2), AccAt(acc, q, 3)));
  }
  ConsumerBarrier();
  if (t == 0) AddRelease(&a.counters[tile], 1u);
}

// The shared tile this CTA finishes (it holds the tile's last k-block): waits until every lower
// sharer has published, then adds their shares to its own in CTA order (the same order on every
// run) and stores the tile. acc is overwritten; the counter is left at zero for the next launch.
template <int kTileN, bool kSilu, bool kF32>
__device__ void FinishSharedTile(const Args& a, int32_t tile, float (&acc)[kTileN / 128][64]) {
  const int t = threadIdx.x;
  const int first = CtaOf(a, static_cast<int64_t>(tile) * a.k_blocks);
  const uint32_t sharers = static_cast<uint32_t>(blockIdx.x - first);
  if (t == 0) {
    while (LoadAcquire(&a.counters[tile]) != sharers) {
    }
    a.counters[tile] = 0;
  }
  ConsumerBarrier();
  for (int c = first; c < static_cast<int>(blockIdx.x); ++c) {
    const float4* share = ShareSlot<kTileN>(a, c);
#pragma unroll
    for (int q = 0; q < Tile<kTileN>::kAcc / 4; ++q) {
      const float4 p = __ldcg(share + q * kConsumers + t);
      AccAt(acc, q, 0) += p.x, AccAt(acc, q, 1) += p.y, AccAt(acc, q, 2) += p.z;
      AccAt(acc, q, 3) += p.w;
    }
  }
  StoreTile<kTileN, kSilu, kF32>(a, tile, acc);
}

// The consumers: one warpgroup multiplies each stage as it lands (one wgmma group in flight: the
// stage before is released once the group after it is issued) and, at the end of each of its
// tiles, stores the tile, publishes its share or finishes it.
template <int kTileN, bool kSilu, bool kF32>
__device__ void Consume(const Args& a, uint8_t* smem, uint64_t* full, uint64_t* empty,
                        int64_t begin, int64_t end) {
  using T = Tile<kTileN>;
  PdlWait();
  float acc[T::kHalves][64];
#pragma unroll
  for (int h = 0; h < T::kHalves; ++h) {
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[h][e] = 0.0f;
  }
  const int32_t first_tile = static_cast<int32_t>(begin / a.k_blocks);
  int64_t i = 0;  // this CTA's iteration count: the position in the stage ring
  for (int32_t tile = static_cast<int32_t>((end - 1) / a.k_blocks); tile >= first_tile; --tile) {
    const int64_t t0 = static_cast<int64_t>(tile) * a.k_blocks;
    const int32_t kb0 = static_cast<int32_t>((begin > t0 ? begin : t0) - t0);
    const int32_t kb1 = static_cast<int32_t>((end < t0 + a.k_blocks ? end : t0 + a.k_blocks) - t0);
    int previous = -1;  // the stage whose wgmma group may still be running
    for (int32_t kb = kb0; kb < kb1; ++kb, ++i) {
      const int s = static_cast<int>(i % T::kStages);
      hopper::MbarWait(&full[s], static_cast<uint32_t>((i / T::kStages) & 1));
      const uint8_t* stage = smem + s * T::kStageBytes;
      const uint64_t a_desc = hopper::SmemDescSwizzle128(stage);
      const uint64_t b_desc = hopper::SmemDescSwizzle128(stage + T::kABytes);
      hopper::WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
#pragma unroll
        for (int h = 0; h < T::kHalves; ++h) {
          // Half h: weight rows 128 h.. of the stage, 128 rows of 128 bytes further on.
          hopper::WgmmaM64N128K16(acc[h], a_desc + 2 * kk,
                                  b_desc + 2 * kk + h * (128 * kBlockK * 2 >> 4),
                                  kb > kb0 || kk > 0);
        }
      }
      hopper::WgmmaCommit();
      hopper::WgmmaWaitPrevious();
      if (previous >= 0) hopper::MbarArrive(&empty[previous]);
      previous = s;
    }
    hopper::WgmmaWaitAll();
    // The epilogue's register reads of acc stay after the wait.
    for (int h = 0; h < T::kHalves; ++h) hopper::WgmmaFenceOperands(acc[h]);
    hopper::MbarArrive(&empty[previous]);
    if (tile == first_tile) PdlLaunchDependents();
    if (kb0 == 0 && kb1 == a.k_blocks) {
      StoreTile<kTileN, kSilu, kF32>(a, tile, acc);
    } else if (kb1 == a.k_blocks) {
      FinishSharedTile<kTileN, kSilu, kF32>(a, tile, acc);
    } else {
      PublishShare<kTileN>(a, tile, acc);
    }
  }
}

#endif  // RTGEN_HOPPER_DEVICE_CODE

template <int kTileN, bool kSilu, bool kF32>
__global__ void __launch_bounds__(kThreads, 1) HopperGemmKernel(const __grid_constant__ Args a) {
#if RTGEN_HOPPER_DEVICE_CODE
  using T = Tile<kTileN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (hopper::SmemAddr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + T::kStages * T::kStageBytes);
  uint64_t* empty = full + T::kStages;
  const int64_t begin = IterBegin(a, blockIdx.x), end = IterBegin(a, blockIdx.x + 1);
  if (threadIdx.x == kConsumers) {
    for (int s = 0; s < T::kStages; ++s) {
      hopper::MbarInit(&full[s], 1);
      hopper::MbarInit(&empty[s], kConsumers);
    }
    hopper::FenceBarrierInit();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumers) {  // the producer warp; from here on no block-wide barrier
    if (threadIdx.x == kConsumers) {
      Produce<kTileN, kSilu>(a, smem, full, empty, begin, end);
    } else {
      PdlWait();
    }
    return;
  }
  Consume<kTileN, kSilu, kF32>(a, smem, full, empty, begin, end);
#else
  PdlWait();  // never launched: HopperGemmAvailable is false without sm_90a code
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A [rows, k] bf16 row-major matrix read in boxes of 64 (k) x box_rows, 128-byte swizzled as
// SmemDescSwizzle128 describes; reads past the matrix fill zeros.
bool EncodeMap(CUtensorMap* map, const void* base, int32_t rows, int32_t k, int32_t box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {kBlockK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides,
                box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int kTileN, bool kSilu, bool kF32>
cudaError_t Launch(const Args& args, int ctas, cudaStream_t stream) {
  const auto kernel = HopperGemmKernel<kTileN, kSilu, kF32>;
  // Set on every launch (a per-device attribute; host only, not a stream operation).
  const cudaError_t opt_in = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(Tile<kTileN>::kSmemBytes));
  if (opt_in != cudaSuccess) return opt_in;
  return LaunchKernel(kernel, dim3(ctas), dim3(kThreads), Tile<kTileN>::kSmemBytes, stream, args);
}

// One thread per 16-byte chunk of the tiled layout (hopper_gemm.h HopperTileWeights): chunk q is
// stored chunk q % 8 of a 128-byte row, which holds logical chunk (q % 8) ^ (row % 8) — the
// 128-byte swizzle the 2D copies apply, so a bulk copy lands the same shared-memory image.
__global__ void TileWeightsKernel(const __nv_bfloat16* w, int32_t n, int32_t k, int32_t tile_n,
                                  bool silu_mul, int32_t k_blocks, int64_t chunks, uint4* tiled) {
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < chunks;
       q += int64_t{gridDim.x} * blockDim.x) {
    const int r = static_cast<int>((q / 8) % tile_n);
    const int64_t box = q / 8 / tile_n;
    const int32_t tile = static_cast<int32_t>(box / k_blocks);
    const int32_t kb = static_cast<int32_t>(box % k_blocks);
    const int c = static_cast<int>(q % 8) ^ (r % 8);
    const int32_t half = tile_n / 2;
    const int64_t row = silu_mul ? (r < half ? int64_t{tile} * half + r
                                             : n / 2 + int64_t{tile} * half + (r - half))
                                 : int64_t{tile} * tile_n + r;
    const int32_t col = kb * kBlockK + 8 * c;
    tiled[q] = row < n && col < k
                   ? *reinterpret_cast<const uint4*>(w + row * k + col)
                   : make_uint4(0, 0, 0, 0);
  }
}

// Output tiles of p at tile_n weight rows per tile (a SiLU·mul tile: tile_n / 2 of each half).
int64_t Tiles(const HopperGemmParams& p, int32_t tile_n) {
  return p.silu_mul ? (p.n / 2) / (tile_n / 2) : (p.n + tile_n - 1) / tile_n;
}

}  // namespace

size_t HopperGemmPartialBytes(int ctas) {
  return size_t{1} * ctas * kConsumers * kMaxAcc * sizeof(float);
}

bool HopperGemmAvailable(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return prop.major == 9 && prop.minor == 0 && TensorMapEncoder() != nullptr &&
         HopperDeviceCodeRuns(device);
}

size_t HopperTiledWeightElems(int32_t n, int32_t k, int32_t tile_n, bool silu_mul) {
  HopperGemmParams p;
  p.n = n;
  p.silu_mul = silu_mul;
  const int64_t k_blocks = (k + kBlockK - 1) / kBlockK;
  return static_cast<size_t>(Tiles(p, tile_n) * k_blocks * tile_n * kBlockK);
}

cudaError_t HopperTileWeights(const __nv_bfloat16* w, int32_t n, int32_t k, int32_t tile_n,
                              bool silu_mul, __nv_bfloat16* tiled, cudaStream_t stream) {
  if ((tile_n != 128 && tile_n != 256) || n < 2 || n % 2 != 0 || k < 8 || k % 8 != 0 ||
      (silu_mul && (n / 2) % (tile_n / 2) != 0) || !Aligned16(w) || !Aligned16(tiled)) {
    return cudaErrorInvalidValue;
  }
  const int32_t k_blocks = (k + kBlockK - 1) / kBlockK;
  const int64_t chunks = static_cast<int64_t>(HopperTiledWeightElems(n, k, tile_n, silu_mul)) / 8;
  const int blocks = static_cast<int>(std::min<int64_t>((chunks + 255) / 256, 65536));
  TileWeightsKernel<<<blocks, 256, 0, stream>>>(w, n, k, tile_n, silu_mul, k_blocks, chunks,
                                                reinterpret_cast<uint4*>(tiled));
  return cudaGetLastError();
}

int32_t HopperGemmTileN(const HopperGemmParams& p) {
  if (p.tile_n != 0) return p.tile_n;
  // RTGEN_HOPPER_GEMM_TILE=256 (A/B): the wider tile everywhere it fits.
  static const int32_t env_tile =
      EnvChoice("RTGEN_HOPPER_GEMM_TILE", {"128", "256"}, 0) == 1 ? 256 : 128;
  return env_tile;
}

bool HopperGemmSupported(const HopperGemmParams& p, const HopperGemmWorkspace& ws) {
  const int32_t tile_n = HopperGemmTileN(p);
  if (tile_n != 128 && tile_n != 256) return false;
  if (p.m < 1 || p.m > kHopperGemmMaxRows || p.n < 2 || p.n % 2 != 0 || p.k < 8 ||
      p.k % 8 != 0) {
    return false;
  }
  if (!Aligned16(p.x) || !Aligned16(p.w) || !Aligned16(p.y)) return false;
  if (p.w_tiled != nullptr && (p.tile_n == 0 || !Aligned16(p.w_tiled))) return false;
  if (p.silu_mul && (p.y_f32 || (p.n / 2) % (tile_n / 2) != 0)) return false;
  return Tiles(p, tile_n) <= kHopperGemmMaxTiles && ws.partials != nullptr &&
         ws.counters != nullptr && ws.ctas > 0;
}

cudaError_t HopperGemm(const HopperGemmParams& p, const HopperGemmWorkspace& ws,
                       cudaStream_t stream) {
  if (!HopperGemmSupported(p, ws)) return cudaErrorInvalidValue;
  const int32_t tile_n = HopperGemmTileN(p);
  Args args;
  std::memset(&args, 0, sizeof(args));
  const int32_t w_box = p.silu_mul ? tile_n / 2 : tile_n;
  if (!EncodeMap(&args.x_map, p.x, p.m, p.k, kRows) ||
      (p.w_tiled == nullptr && !EncodeMap(&args.w_map, p.w, p.n, p.k, w_box))) {
    return cudaErrorInvalidValue;
  }
  args.w_tiled = reinterpret_cast<const uint8_t*>(p.w_tiled);
  args.y = p.y;
  args.partials = ws.partials;
  args.counters = ws.counters;
  args.m = p.m;
  args.y_cols = p.silu_mul ? p.n / 2 : p.n;
  args.up_row = p.silu_mul ? p.n / 2 : 0;
  args.k_blocks = (p.k + kBlockK - 1) / kBlockK;
  args.iters = Tiles(p, tile_n) * args.k_blocks;
  const int ctas = static_cast<int>(std::min<int64_t>(ws.ctas, args.iters));
  if (tile_n == 256) {
    if (p.silu_mul) return Launch<256, true, false>(args, ctas, stream);
    return p.y_f32 ? Launch<256, false, true>(args, ctas, stream)
                   : Launch<256, false, false>(args, ctas, stream);
  }
  if (p.silu_mul) return Launch<128, true, false>(args, ctas, stream);
  return p.y_f32 ? Launch<128, false, true>(args, ctas, stream)
                 : Launch<128, false, false>(args, ctas, stream);
}

}  // namespace rtgen::kernels
