#pragma once
// Decode attention on tensor cores (DecodeAttention routes here when it applies; parameters and
// key partitions as in decode_attention.h). One block per (kv head, sequence, partition) serves
// the kv head's query heads (at most 16) as the 16 rows of an mma.m16n8k16: S = Q K^T and
// O = P V run on tensor cores (P rounded to bf16, fp32 accumulation), keys staged in shared
// memory by asynchronous copies, two tiles in flight (three in 2-warp blocks while the grid fits).

#include <cuda_runtime.h>

#include "kernels/decode_attention.h"

namespace rtgen::kernels {

// True when the tensor-core kernel serves p: p.tensor_cores, head_dim 64 or 128 (split or not;
// RTGEN_DECODE_MMA128_SPLITS=0 keeps split head_dim 128 on CUDA cores, for A/B), and at most 16
// query heads per kv head. Blocks of 8, 4 or 2 warps (128-, 64- or 32-key tiles), or 16 (256
// keys) at head_dim 64 with p.prefetch_kv: the most with which the whole grid is resident at once.
bool DecodeAttentionMmaSupports(const DecodeAttentionParams& p);

// The warps per block DecodeAttentionMma(p) launches with on the current device (2, 4, 8 or 16),
// or a CUDA error's negated code where the kernels cannot be prepared. Blocks of different warp
// counts sum the warps' partial outputs in different orders: tests compare bits only between
// launches of the same count.
int DecodeAttentionMmaWarps(const DecodeAttentionParams& p);

// The key tiles in flight a block of DecodeAttentionMma(p) keeps (2, or 3 for 2-warp blocks while
// the whole grid fits at once with three), or a CUDA error's negated code as above.
int DecodeAttentionMmaStages(const DecodeAttentionParams& p);

// Called by DecodeAttention when DecodeAttentionMmaSupports(p), after it has validated p
// (sizes, 16-byte alignment of q and the caches, q_stride % 8 == 0); nothing is checked again.
cudaError_t DecodeAttentionMma(const DecodeAttentionParams& p, cudaStream_t stream);

}  // namespace rtgen::kernels
