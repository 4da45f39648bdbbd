#pragma once
// Decode attention on tensor cores, for steps whose batch fills the GPU without key splits
// (DecodeAttention routes here when it applies; parameters as in decode_attention.h). One block
// per (kv head, sequence) serves the kv head's query heads (at most 16) as the 16 rows of an
// mma.m16n8k16: S = Q K^T and O = P V run on tensor cores (P rounded to bf16, fp32
// accumulation), keys staged in shared memory by asynchronous copies, two tiles in flight.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/decode_attention.h"

namespace rtgen::kernels {

// True when the tensor-core kernel serves p: one partition per sequence (num_splits == 1),
// head_dim 64 or 128, at most 16 query heads per kv head, and not switched off
// (RTGEN_DECODE_MMA=0 in the environment, for A/B).
bool DecodeAttentionMmaSupports(const DecodeAttentionParams& p);

cudaError_t DecodeAttentionMma(const DecodeAttentionParams& p, cudaStream_t stream);

// True where a decode step should not split keys at any batch size, so that the tensor-core
// kernel serves it: head_dim 64 with at most 16 query heads per kv head (unless switched off).
// Measured on the H200 against the split CUDA-core kernel at batch 1-16, context ~190:
// SmolLM2-135M shape 0.64 -> 0.57 ms at batch 1, Llama-3.2-1B shape 0.98 -> 0.95; with
// head_dim 128 (Llama-3-8B shape) the unsplit kernel lost at batch 2-8, so those keep splitting.
bool DecodeAttentionPrefersUnsplit(int32_t head_dim, int32_t group);

}  // namespace rtgen::kernels
