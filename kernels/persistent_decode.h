#pragma once
// The whole decode step of one sequence (batch 1) as ONE persistent kernel: every layer
// (RMSNorm, QKV, RoPE + KV store, paged GQA attention, O-proj + residual, RMSNorm, gate_up +
// SiLU·mul, down-proj + residual), then the final RMSNorm and the LM head (fp32 logits).
//
// Why: at batch 1 a small model's step is a chain of ~5 kernels × layers that each move well
// under a megabyte, so launch and drain gaps, not bytes, set the time. Here one block per SM
// stays resident for the whole step; each block holds its share of every layer's weights in
// shared memory (copied by the TMA one to two layers ahead, part by part, so no phase waits on
// DRAM for weights), and the phases hand their outputs to the next one through "flagged words":
// 64-bit words of 32 bits of data and a 32-bit flag that names this launch, written and read
// whole. A reader spins until every word it needs carries this launch's flag — one
// store-to-load trip per hand-off instead of a grid barrier (fence, atomic, spin) followed by a
// load.
//
// Invariants:
//   - launched cooperatively with exactly the co-resident grid Configure() returns (a block
//     spinning on a word whose writer is not resident would hang);
//   - `exchange` (PersistentExchangeWords words) and `epoch` ([2] u32) are zero before the first
//     launch; each launch writes flag epoch[0] + 1 and its last block advances epoch[0] (so a
//     captured graph can replay it, and no word of an earlier launch is taken for this one);
//   - a step whose slot_mapping[0] is -1 writes no KV, and context_lens[0] = 0 gives a zero
//     attention row (graph capture runs such a dummy step);
//   - numerics follow the multi-kernel path: bf16 activations rounded where that path stores
//     them (normed rows, q/k/v, attention output, projections, gate/up, act), fp32 residual and
//     accumulation; only fp32 summation order differs. Deterministic: fixed reduction orders,
//     no float atomics, so replays are bitwise equal.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

struct PersistentLayer {
  const float* attn_norm = nullptr;          // [hidden]
  const float* ffn_norm = nullptr;           // [hidden]
  const __nv_bfloat16* wqkv = nullptr;       // [q_dim + 2 kv_dim, hidden]
  const __nv_bfloat16* wo = nullptr;         // [hidden, q_dim]
  const __nv_bfloat16* w_gate_up = nullptr;  // [2 inter, hidden]: gate rows then up rows
  const __nv_bfloat16* w_down = nullptr;     // [hidden, inter]
};

struct PersistentDecodeParams {
  const PersistentLayer* layers = nullptr;   // device array [num_layers]
  const float* final_norm = nullptr;         // [hidden]
  const __nv_bfloat16* lm_head = nullptr;    // [vocab, hidden]
  const float* inv_freq = nullptr;           // [head_dim / 2]
  int32_t num_layers = 0;
  int32_t hidden = 0;                        // <= 1024, % 8 == 0
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;                  // divides num_heads
  int32_t head_dim = 0;                      // 64 or 128
  int32_t inter = 0;                         // % 8 == 0, <= 8192
  int32_t vocab = 0;
  float eps = 1e-5f;
  float scale = 1.0f;                        // softmax scale
  int32_t keys_per_part = 128;               // attention keys per block while blocks last,
                                             // 16..65536
  // Step inputs (the first entry of each StepArrays array: one sequence, one token).
  const int32_t* positions = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* context_lens = nullptr;     // includes the new token
  const int32_t* block_table = nullptr;      // row 0
  // Paged KV pool: layer l at k_cache + l * layer_elems, [blocks, block_size, kv_heads, hd].
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  int64_t layer_elems = 0;
  int32_t block_size = 0;
  // Workspace.
  const float* residual = nullptr;           // [hidden]: the embedding row
  uint64_t* exchange = nullptr;              // [PersistentExchangeWords], zero before launch 1
  uint32_t* epoch = nullptr;                 // [2]: launches done, blocks done; zero at first
  float* logits = nullptr;                   // [vocab]
  // Diagnostic (RTGEN_PERSISTENT_TRACE=1): [2][num_layers][kPersistentTracePoints][grid] stamps
  // of each block's phase boundaries, global timer (ns) then SM clock; null: none taken.
  uint64_t* trace = nullptr;
};

// Trace points of a layer: Q start, Q input normed, Q weights in, Q GEMV done, Q words stored,
// A's q in, A done, O input merged, O GEMV done, O words stored, G input normed, G GEMV done,
// G words stored, D input in, D GEMV done, D words stored.
inline constexpr int kPersistentTracePoints = 16;

// Attention blocks per q head at most: a context is cut into key partitions of about
// keys_per_part keys, one block each, up to this many (and as many as the grid has blocks for).
inline constexpr int kPersistentMaxParts = 16;

// Flagged words the kernel hands its phases' outputs through (all layers).
int64_t PersistentExchangeWords(const PersistentDecodeParams& p);

// The launch shape for these dimensions: grid = co-resident blocks (one per SM), 0 when the
// shapes are unsupported — head_dim other than 64 / 128, hidden > 1024, a layer's weights too
// large for two copies of each block's share (with the layer table) in shared memory, a device
// other than sm_90 or a binary without sm_90a code — (then the multi-kernel path must be used).
struct PersistentLaunch {
  int32_t grid = 0;
  int32_t threads = 0;
  size_t smem_bytes = 0;
};
PersistentLaunch ConfigurePersistentDecode(const PersistentDecodeParams& p, int device);

cudaError_t PersistentDecode(const PersistentDecodeParams& p, const PersistentLaunch& launch,
                             cudaStream_t stream);

}  // namespace rtgen::kernels
