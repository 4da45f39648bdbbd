#pragma once
// The MLP half of a one-token layer (batch 1, linked norms: gemv.h GemvNormLink) in ONE launch:
// gate/up projection, SwiGLU and down projection, where the layered path runs two GEMVs with a
// kernel boundary between them.
//
// Block b owns `features` intermediate features [f0, f0 + features): it loads its gate and up
// rows and its columns of the down weight into registers before its PDL wait (they do not depend
// on the kernel before), then after the wait forms act = silu(gate) * up for its features
// with GemvSiluMul's scale and roundings (the consumer's 1 / rms, bf16), multiplies them by its
// down columns and adds that partial down product to `pending` in fixed point (gemv.h
// kPendingScale; integer atomics: the total does not depend on the order in which blocks
// arrive, so replays are bitwise equal). Then either
//   - no producer link: the launch ends there; the next qkv GEMV rebuilds its input row from
//     the pending products (GemvPendingRow) and the o GEMV after it joins them to the residual
//     and zeroes them (GemvNormLink::pending); or
//   - a producer link (the last layer's, whose consumer is the LM head): the last block to
//     arrive (a counter) reads the totals, zeroes `pending` and the counter, and does the
//     producer's join (NormLinkJoin: residual += bf16(down), normed row, sum of squares) as the
//     down GEMV's epilogue does.
//
// Numerics: gate, up and act with GemvSiluMul's scale and roundings, their dot products summed
// in another order (so a few act values may be an ulp apart); the down products summed in
// another order than the down GEMV's (fp32 per block, fixed point across blocks), then rounded
// to bf16 as that GEMV stores them. A partial product that is not finite or not below 2^31 in
// magnitude saturates the fixed point (a wrong finite value, where the GEMVs would carry the
// NaN or Inf on).
//
// Invariants: `pending` ([hidden]) is zero before the launch; `*arrivals` is zero before and
// after; one launch at a time uses them (a stream's launches are ordered).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemv.h"

namespace rtgen::kernels {

constexpr int kFusedMlpMaxHidden = 1024;

struct FusedMlpParams {
  const __nv_bfloat16* x = nullptr;          // [hidden] the FFN norm's normed row (consumer)
  const __nv_bfloat16* w_gate_up = nullptr;  // [2 inter, hidden]: gate rows, then up rows
  const __nv_bfloat16* w_down = nullptr;     // [hidden, inter]
  int32_t hidden = 0;                        // multiple of 8, <= kFusedMlpMaxHidden
  int32_t inter = 0;                         // multiple of `features`
  int32_t features = 0;                      // per block: 8 or 16; 0: FusedMlpDefaultFeatures()
  GemvNormLink consumer;                     // scale_by, zero_after, eps: the FFN norm
  GemvNormLink producer;                     // none, or residual, weight, normed, sum_sq
  long long* pending = nullptr;              // [hidden] fixed-point down products, zero before
  unsigned int* arrivals = nullptr;          // with a producer: blocks done, zero before/after
};

// The intermediate features per block a launch with features = 0 takes:
// RTGEN_FUSED_MLP_FEATURES (8 or 16), default 16. Read once per process.
int FusedMlpDefaultFeatures();

// True when `p`'s shapes, alignment and links suit the kernel: the consumer link complete (its
// zero_after not its scale_by), the producer link complete or unset (then arrivals may be null),
// pending set, 16-byte aligned x and weights.
bool FusedMlpSupported(const FusedMlpParams& p);
cudaError_t FusedMlp(FusedMlpParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
