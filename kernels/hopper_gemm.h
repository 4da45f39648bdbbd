#pragma once
// Linear layers of 1..64 rows on Hopper (sm_90a, compute capability 9.0): y[m, n] = x[m, k]
// w[n, k]^T, bf16 operands, fp32 accumulation, bf16 or fp32 output; with silu_mul the SwiGLU
// block's first half, w = [gate; up] (n = 2 * inter) and y = act[m, inter] = silu(gate) * up.
//
// A decode step at batch 16-64 streams every weight once: the kernel is a weight stream at the
// memory bandwidth. One CTA per SM; a producer warp copies 64-wide k-blocks of the weight and of
// x with the TMA into a ring of shared-memory stages, and one warpgroup multiplies them with
// wgmma (x's 64 rows, zero-filled past m, are wgmma's M; tile_n weight rows are its N). The
// (output tile, k-block) iterations are split evenly over the CTAs (stream-K), so every SM
// streams the same bytes whatever the shape; a tile split between CTAs is summed in CTA order by
// the highest of them (bitwise repeatable: eager and graph-replayed steps agree). Launched as a
// programmatic dependent (launch.h): the first stages' weight copies are issued before the PDL
// wait, under the previous kernel's tail, so no kernel may write w (weights never are).
// Status (H200, session 15): correct, but slower than cuBLASLt at Llama-3-8B's 16- and 64-row
// shapes except down at 64 rows; the split tiles' summing costs ~4 us per launch where every
// tile is split (o, qkv). MatmulContext runs it only when RTGEN_HOPPER_GEMM asks
// (docs/perf/gpu_notes.md).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rtgen::kernels {

inline constexpr int kHopperGemmMaxRows = 64;
inline constexpr int kHopperGemmMaxTiles = 8192;  // output tiles per launch (counters)

struct HopperGemmParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major, 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major, 16-byte aligned
  void* y = nullptr;                 // [m, n] (or [m, n / 2] with silu_mul) row-major
  bool y_f32 = false;                // fp32 output (not with silu_mul)
  int32_t m = 0;                     // 1..kHopperGemmMaxRows
  int32_t n = 0;                     // even; with silu_mul n / 2 a multiple of tile_n / 2
  int32_t k = 0;                     // multiple of 8
  bool silu_mul = false;
  int32_t tile_n = 0;                // 128 or 256 weight rows per tile; 0: HopperGemmTileN
  // Optional: w laid out by HopperTileWeights for this tile_n (nonzero) and silu_mul. The weight
  // stream then reads it by contiguous bulk copies instead of 2D boxes of w (w is not read): on
  // the H200 a whole-GPU stream of 16 KiB contiguous copies reads ~5.0 TB/s, of 64 x 128 boxes of
  // a row-major [rows, 4096] matrix ~4.2 (rtgen-sm-stream-bench, session 26) — yet the GEMM
  // gains only 1-2 % from it at Llama-3-8B's 64-row shapes (5 % at the LM head; session 27):
  // its fixed costs, not the stream, set its time there. Nothing in the engine uses it.
  const __nv_bfloat16* w_tiled = nullptr;
};

// Elements of w laid out for HopperGemm's bulk copies: per output tile, per 64-wide k-block, the
// tile's tile_n weight rows (silu_mul: tile_n / 2 gate rows, then the matching up rows) of 64
// elements, each row's 16-byte chunks in the 128-byte swizzled order the 2D copies produce, zeros
// past n and k. Every (tile, k-block) is one contiguous tile_n * 128 bytes.
size_t HopperTiledWeightElems(int32_t n, int32_t k, int32_t tile_n, bool silu_mul);

// Writes w [n, k] (row-major) in that layout to `tiled` (HopperTiledWeightElems elements,
// 16-byte aligned). tile_n 128 or 256; with silu_mul n / 2 a multiple of tile_n / 2.
cudaError_t HopperTileWeights(const __nv_bfloat16* w, int32_t n, int32_t k, int32_t tile_n,
                              bool silu_mul, __nv_bfloat16* tiled, cudaStream_t stream);

// Device scratch of one stream's launches (launches on one stream may share it: each uses it only
// after its PDL wait, i.e. after the previous launch completed).
struct HopperGemmWorkspace {
  float* partials = nullptr;          // HopperGemmPartialBytes(ctas)
  uint32_t* counters = nullptr;       // kHopperGemmMaxTiles, zero between launches
  int ctas = 0;                       // CTAs per launch: the SM count
};

// Bytes of HopperGemmWorkspace::partials for `ctas` CTAs (one shared tile's share each).
size_t HopperGemmPartialBytes(int ctas);

// Whether `device` runs the kernel: compute capability 9.0, this binary built for sm_90a, and the
// driver's tensor-map encoder found. Launches a probe kernel: call outside stream capture.
bool HopperGemmAvailable(int device);

// The tile width the launch picks for p when p.tile_n is 0.
int32_t HopperGemmTileN(const HopperGemmParams& p);

// Whether HopperGemm takes p (shape, alignment, workspace); the device must be available.
bool HopperGemmSupported(const HopperGemmParams& p, const HopperGemmWorkspace& ws);

cudaError_t HopperGemm(const HopperGemmParams& p, const HopperGemmWorkspace& ws,
                       cudaStream_t stream);

}  // namespace rtgen::kernels
