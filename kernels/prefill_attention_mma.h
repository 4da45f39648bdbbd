#pragma once
// Causal paged prefill attention on tensor cores (the FlashAttention-2 scheme): a block takes 64
// consecutive query tokens of one query head, 16 a warp as the rows of an mma.m16n8k16, and walks
// their sequence's keys in 64-key tiles copied from the paged cache into shared memory (two
// stages), with an online softmax in registers. S = Q K^T and O = P V on tensor cores (P rounded
// to bf16, fp32 accumulation). Same contract as PrefillAttention (prefill_attention.h) for the
// blocks it serves; a block's runs of one sequence each (prefill_runs.h) are walked one after
// another.

#include <cuda_runtime.h>

#include "kernels/prefill_attention.h"

namespace rtgen::kernels {

// True when the tensor-core kernel serves p: head_dim 64 or 128, whole query groups per kv head,
// q, the caches and q_stride in 16-byte units (cp.async copies), out 4-byte aligned.
bool PrefillAttentionMmaSupports(const PrefillAttentionParams& p);

// Runs the tensor-core kernel over the blocks of at most kPrefillMaxRuns runs
// (prefill_runs.h); the other blocks' rows are left unwritten, for the CUDA-core kernel. p must
// be supported (PrefillAttentionMmaSupports).
cudaError_t PrefillAttentionMma(const PrefillAttentionParams& p, cudaStream_t stream);

}  // namespace rtgen::kernels
