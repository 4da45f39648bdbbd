#pragma once
// The one-row decode GEMV over large weights, streamed in slabs (GemvTuning::slab, with rows):
// the launch's units (gemv_rows_units.cuh: two weight rows each, every epilogue of the
// row-streaming kernel) are dealt to two blocks per SM in consecutive ranges, and each block
// reads its range's rows front to back for the whole launch, its warps side by side: the bytes
// an SM has in flight are one contiguous span, the next span requested before the current one
// is multiplied. A warp's span (4 loads of 512 bytes) lies in one row (k % 1024 == 0); its sum
// goes to shared memory per (row, span), and the block adds a row's spans in order before the
// units' epilogues: deterministic, and the same sum for a row in every epilogue.
//
// Measured on the H200 against the row-streaming kernel (session 37). Alone (rtgen-gemv-bench,
// m = 1, plain store, launches back to back): Llama-3-8B qkv 15.4 -> 13.5-14.3 us, o 11.0-11.2
// -> 9.5-10.1, gate_up 55.8-56.2 -> 54.3-54.8, down 32.8 -> 29.1-29.5, LM head 237-242 ->
// 231-235; at k = 2048 (Llama-3.2-1B) level or slower. In the decode step it did not carry
// over: Llama-3-8B b1 graph TPOT 3.980-3.992 ms with the row-streaming kernel against
// 3.992-4.016 with this one (and 4.07-4.23 at the other launch shapes), so it is off by
// default: RTGEN_GEMV_SLAB=1 takes it where k >= 4096, =all wherever it fits.
// The kernels' internal interface; callers go through gemv.h.

#include <cuda_runtime.h>

#include "kernels/gemv.h"
#include "kernels/gemv_rows.h"

namespace rtgen::kernels {

// Whether the slab kernel can run p with epilogue `epi` (with GemvSupported(p)): one input row,
// no pending products, k % 1024 == 0, and its shared memory within the limit.
bool GemvSlabFits(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi);

// Whether the default tuning takes the slab kernel for a launch the row-streaming kernel would
// run: never unless RTGEN_GEMV_SLAB=1 (k >= 4096) or =all (any k), and GemvSlabFits for the
// plain epilogue.
bool GemvSlabByDefault(const GemvParams& p);

cudaError_t LaunchGemvSlab(const GemvParams& p, const GemvRopeParams& r, GemvRowsEpilogue epi,
                           bool pdl, cudaStream_t stream);

}  // namespace rtgen::kernels
