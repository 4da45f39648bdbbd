#pragma once
// The whole decode step of one sequence (batch 1) as ONE persistent kernel: every layer
// (RMSNorm, QKV, RoPE + KV store, paged GQA attention, O-proj + residual, RMSNorm, gate_up +
// SiLU·mul, down-proj + residual), then the final RMSNorm and the LM head (fp32 logits).
//
// Why: at batch 1 a small model's step is a chain of ~8 kernels × layers that each move well
// under a megabyte, so launch and drain gaps, not bytes, set the time. Here one block per SM
// stays resident for the whole step and the phases are separated by grid-wide barriers (a
// counter in global memory) instead of kernel boundaries: five per layer.
//
// Invariants:
//   - launched cooperatively with exactly the co-resident grid Configure() returns (a grid
//     barrier with a non-resident block would hang);
//   - `barrier` ([2] u32) is zero before a launch and the kernel leaves it zero (so a captured
//     graph can replay it);
//   - a step whose slot_mapping[0] is -1 writes no KV, and context_lens[0] = 0 gives a zero
//     attention row (graph capture runs such a dummy step);
//   - numerics follow the multi-kernel path: bf16 activations rounded where that path stores
//     them (normed rows, q/k/v, attention output, projections, gate/up, act), fp32 residual and
//     accumulation; only fp32 summation order differs. Deterministic: fixed reduction orders,
//     no float atomics, so replays are bitwise equal.
//   - intra-kernel data is read with L1-bypassing loads (ld.global.cg): L1 is not coherent
//     between SMs.

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
  int32_t hidden = 0;                        // <= 8192, % 8 == 0
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;                  // divides num_heads
  int32_t head_dim = 0;                      // 64 or 128
  int32_t inter = 0;                         // % 8 == 0
  int32_t vocab = 0;
  float eps = 1e-5f;
  float scale = 1.0f;                        // softmax scale
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
  float* residual = nullptr;                 // [hidden]: the embedding row on entry
  __nv_bfloat16* qkv = nullptr;              // [q_dim + 2 kv_dim]
  __nv_bfloat16* attn = nullptr;             // [q_dim]
  __nv_bfloat16* act = nullptr;              // [inter]
  float* part_acc = nullptr;                 // [num_heads, kMaxChunks, head_dim]
  float* part_ml = nullptr;                  // [num_heads, kMaxChunks, 2]
  uint32_t* barrier = nullptr;               // [2], zero
  float* logits = nullptr;                   // [vocab]
};

// Key chunks per q head: a context of c tokens is cut into at most kPersistentMaxChunks chunks
// of whole 16-key passes, one warp each (part_acc / part_ml are sized with it).
inline constexpr int kPersistentMaxChunks = 16;

// The launch shape for these dimensions: grid = co-resident blocks (one per SM), 0 when the
// shapes are unsupported (then the multi-kernel path must be used).
struct PersistentLaunch {
  int32_t grid = 0;
  int32_t threads = 0;
  size_t smem_bytes = 0;
};
PersistentLaunch ConfigurePersistentDecode(const PersistentDecodeParams& p, int device);

cudaError_t PersistentDecode(const PersistentDecodeParams& p, const PersistentLaunch& launch,
                             cudaStream_t stream);

}  // namespace rtgen::kernels
