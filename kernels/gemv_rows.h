#pragma once
// The decode GEMV for one input row (m = 1) over large weights (gemv.h, GemvTuning::rows): a warp
// streams two weight rows, its 32 lanes reading 512 contiguous bytes of a row per 16-byte load
// instruction. (The tensor-core GEMV reads 8 rows x 64 bytes per warp instruction, which streams
// slower where the weight spans many waves of tiles.) fp32 dot products, strided over the lanes
// and then summed by a shuffle tree: deterministic, and a row's sum is the same in every variant,
// so the fused variants are bit for bit the plain one followed by SiluMul / RopeKvStore.
// The kernels' internal interface; callers go through gemv.h.

#include <cuda_runtime.h>

#include "kernels/gemv.h"

namespace rtgen::kernels {

enum class GemvRowsEpilogue {
  kStore,   // y[0, n], bf16 or fp32
  kSwiGlu,  // p.n = 2 * inter weight rows [gate; up], y = act [1, inter] bf16
  kRope,    // the qkv rows with RoPE and the KV store (GemvRopeParams), y bf16
};

// Whether the RoPE variant lets its dependent (decode attention) start before its main loop
// (RTGEN_ROPE_EARLY_DEPENDENTS, on unless "0"), or after it.
bool GemvRowsRopeEarlyDependents();

// The units of a launch with epilogue `epi` (gemv_rows_units.cuh: two weight rows each).
int GemvRowsUnitCount(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi);

// Needs GemvSupported(p) and p.m == 1 (and what the epilogue's own entry point checks).
cudaError_t LaunchGemvRows(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi,
                           bool pdl, cudaStream_t stream);

}  // namespace rtgen::kernels
