#pragma once
// The attention half of a decoder layer for one sequence decoding one token, in one launch: the
// qkv projection (a linked norm's consumer, gemv.h GemvNormLink), RoPE, the KV store, decode
// attention over the paged cache and the o projection joined to the residual (the next norm's
// producer). The layered path runs these as three dependent kernels (GemvRopeKvStore,
// DecodeAttention, Gemv), each paying a kernel boundary and a round trip through L2 for its
// input; here one cluster of kAttentionClusterBlocks blocks hands q, the newest key and value,
// and the heads' outputs from block to block through distributed shared memory.
//
// Before its PDL wait each block copies its share of the weights (64 rows of wqkv: one q, k or v
// head; hidden / 16 rows of wo, rounded up) into shared memory and, for a query head, asks L2
// for the keys and values of its first chunk of earlier positions (copied in right after x's
// loads), so what the kernel before it leaves to wait for is mostly the arithmetic and the
// hand-offs. Opt-in in the forward pass (model_forward.h AttentionInCluster): on the H200 the
// 16 SMs' weight copies and the barriers made it level with the three launches, not faster
// (docs/perf/gpu_notes.md, session 25). Three cluster barriers: after the qkv rows
// (block h < num_heads then attends with query head h), after attention (every block then
// multiplies its rows of wo by all heads' outputs) and before leaving (no block's shared memory
// goes while another reads it).
//
// The arithmetic follows the layered path: qkv products scaled by the consumer's 1 / rms and
// rounded to bf16, q and k rotated by rope_math.cuh, attention in fp32 with the output rounded to
// bf16, the o products rounded to bf16 and joined by NormLinkJoin. Sums are formed in another
// order than the GEMV's tensor cores and the attention's mma, so results agree with the layered
// path to bf16 rounding, not bit for bit; a launch is deterministic (graph replays equal eager).
// The newest key and value come from the block that projected them (the cache slot is written
// as well, unless slot_mapping is -1).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemv.h"

namespace rtgen::kernels {

inline constexpr int kAttentionClusterBlocks = 16;
inline constexpr int kAttentionClusterHeadDim = 64;
// Earlier positions held in shared memory at once; longer contexts loop over chunks of this many
// keys (the first copied before the PDL wait, the rest after it).
inline constexpr int kAttentionClusterChunk = 256;

struct AttentionClusterParams {
  const __nv_bfloat16* x = nullptr;     // [hidden] the attention norm's output
  GemvNormLink consumer;                // scale_by (null: x is the normed row), zero_after, eps
  const __nv_bfloat16* wqkv = nullptr;  // [(num_heads + 2 * num_kv_heads) * 64, hidden]
  const __nv_bfloat16* wo = nullptr;    // [hidden, num_heads * 64]
  GemvNormLink producer;                // residual, weight, normed and sum_sq: all set
  const int32_t* positions = nullptr;   // [1] the token's position
  const float* inv_freq = nullptr;      // [32]
  const int32_t* slot_mapping = nullptr;  // [1] the token's cache slot, -1: not stored
  __nv_bfloat16* k_cache = nullptr;     // [num_blocks, block_size, num_kv_heads, 64]
  __nv_bfloat16* v_cache = nullptr;
  const int32_t* block_tables = nullptr;  // [max_blocks_per_seq] the sequence's blocks
  const int32_t* context_lens = nullptr;  // [1] keys attended to, the newest included
  int32_t hidden = 0;                   // a multiple of 8, at most 1024
  int32_t num_heads = 0;                // a multiple of num_kv_heads
  int32_t num_kv_heads = 0;             // num_heads + 2 * num_kv_heads <= 16
  int32_t block_size = 0;
  float scale = 1.0f;                   // softmax scale, usually 1 / 8
  // Optional (tests): the rotated qkv row [(num_heads + 2 * num_kv_heads) * 64] and the
  // attention output [num_heads * 64], as the layered path's buffers would hold them.
  __nv_bfloat16* qkv_out = nullptr;
  __nv_bfloat16* attn_out = nullptr;
};

// Dynamic shared memory a launch for these shapes takes (bytes).
size_t AttentionClusterSmemBytes(int32_t hidden, int32_t num_heads);

// True when the shapes fit (above), the pointers are set and 16-byte aligned where read with
// 16-byte copies (x, the weights, the caches), the producer link is complete, and the current
// device can run the kernel: sm_90a code in this binary, the shared memory, and a cluster of
// kAttentionClusterBlocks blocks (a non-portable size) that can be scheduled.
bool AttentionClusterSupported(const AttentionClusterParams& p);
// cudaErrorInvalidValue when !AttentionClusterSupported(p).
cudaError_t AttentionCluster(const AttentionClusterParams& p, cudaStream_t stream);

}  // namespace rtgen::kernels
