#pragma once
// Where the persistent batch-1 decode kernel (persistent_decode.h) keeps things: which weight
// rows each block computes (and holds in shared memory), the flagged words each phase hands
// on, and the block's shared memory. Host and device compute the same layouts from the same
// dimensions.

#include <cstdint>

#include "kernels/persistent_decode.h"

namespace rtgen::kernels::persistent {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTableCache = 1024;  // block-table entries kept in shared memory

struct Dims {
  int layers, hidden, q_dim, kv_dim, head_dim, heads, kv_heads, inter;
  __host__ __device__ explicit Dims(const PersistentDecodeParams& p)
      : layers(p.num_layers),
        hidden(p.hidden),
        q_dim(p.num_heads * p.head_dim),
        kv_dim(p.num_kv_heads * p.head_dim),
        head_dim(p.head_dim),
        heads(p.num_heads),
        kv_heads(p.num_kv_heads),
        inter(p.inter) {}
};

// The most units (scaled by `unit`) any of `parts` even shares of `units` holds.
__host__ __device__ inline int LargestShare(int units, int parts, int unit) {
  return (units + parts - 1) / parts * unit;
}

// Units [begin, end) of `units` split evenly over `parts`; share i, scaled by `unit`.
struct Share {
  int begin = 0, end = 0;
  __host__ __device__ int size() const { return end - begin; }
  __host__ __device__ static Share Even(int units, int parts, int i, int unit) {
    return {static_cast<int>(int64_t{units} * i / parts) * unit,
            static_cast<int>(int64_t{units} * (i + 1) / parts) * unit};
  }
};

// The weight rows of one block, in every layer. Outputs are handed on two bf16 to a word, so
// shares come in twos: RoPE pairs (row i and i + head_dim/2 of a q or k head) two at a time,
// v rows, SwiGLU features (gate row f, up row inter + f). O and down rows give one fp32 word each.
// Staged order in shared memory: pair lo rows, pair hi rows, v rows | O rows | gate rows, up
// rows | down rows.
struct BlockRows {
  Share pairs, v, o, f, down;
  int qkv_bytes = 0, o_bytes = 0, gate_up_bytes = 0, down_bytes = 0;
  __host__ __device__ BlockRows(const Dims& d, int grid, int block) {
    pairs = Share::Even((d.q_dim + d.kv_dim) / 4, grid, block, 2);
    v = Share::Even(d.kv_dim / 2, grid, block, 2);
    o = Share::Even(d.hidden, grid, block, 1);
    f = Share::Even(d.inter / 2, grid, block, 2);
    down = Share::Even(d.hidden, grid, block, 1);
    qkv_bytes = (2 * pairs.size() + v.size()) * d.hidden * 2;
    o_bytes = o.size() * d.q_dim * 2;
    gate_up_bytes = 2 * f.size() * d.hidden * 2;
    down_bytes = down.size() * d.inter * 2;
  }
  __host__ __device__ int qkv_rows() const { return 2 * pairs.size() + v.size(); }
  __host__ __device__ int o_offset() const { return qkv_bytes; }
  __host__ __device__ int gate_up_offset() const { return qkv_bytes + o_bytes; }
  __host__ __device__ int down_offset() const { return gate_up_offset() + gate_up_bytes; }
};

// Flagged-word offsets inside one layer's block of the exchange; layer l's block starts at
// l * per_layer. `h` of layer l is the residual entering it (of layer num_layers: the final
// residual); layer 0 reads the embedding row instead.
struct Words {
  int64_t h, qkv, att, mid, act, per_layer;
  __host__ __device__ explicit Words(const Dims& d) {
    h = 0;
    qkv = d.hidden;                                  // bf16 pairs of q | k | v (roped)
    att = qkv + (d.q_dim + 2 * d.kv_dim) / 2;        // [head][part][head_dim acc, max, sum]
    mid = att + int64_t{d.heads} * kPersistentMaxParts * (d.head_dim + 2);  // after O-proj
    act = mid + d.hidden;                            // bf16 pairs of SiLU(gate)·up
    per_layer = act + d.inter / 2;
  }
};

// Attention partitions per q head the grid allows.
__host__ __device__ inline int MaxParts(const Dims& d, int grid) {
  const int by_grid = grid / d.heads;
  return by_grid < kPersistentMaxParts ? by_grid : kPersistentMaxParts;
}

// Byte offsets of the block's shared memory: two weight stages (layers l and l + 1), the GEMV
// input x (bf16), the fp32 residual, GEMV results, attention partials (and the attention
// block's scratch), RoPE cos/sin, block table, reduction scratch, two mbarriers, and the layer
// table (every layer's weight pointers, read once at the start).
struct SmemPlan {
  int stage_bytes = 0, x, xf, res, att, cs, table, scratch, bars, layer_table, total;
  __host__ __device__ SmemPlan(const Dims& d, int grid) {
    // The largest share of each kind bounds every block's (even splits differ by one unit).
    const int pairs = LargestShare((d.q_dim + d.kv_dim) / 4, grid, 2);
    const int v = LargestShare(d.kv_dim / 2, grid, 2), f = LargestShare(d.inter / 2, grid, 2);
    const int o = LargestShare(d.hidden, grid, 1), down = o;
    stage_bytes = ((2 * pairs + v) * d.hidden + o * d.q_dim + 2 * f * d.hidden) * 2 +
                  down * d.inter * 2;
    const int rows = 2 * pairs + v + o + 2 * f + down;
    stage_bytes = (stage_bytes + 127) / 128 * 128;
    int x_elems = d.hidden > d.q_dim ? d.hidden : d.q_dim;
    x_elems = x_elems > d.inter ? x_elems : d.inter;
    const int parts = d.heads * MaxParts(d, grid) * (d.head_dim + 2);
    const int attention_scratch = 2 * d.head_dim + kWarps * (d.head_dim + 2);
    x = 2 * stage_bytes;
    xf = x + (x_elems * 2 + 15) / 16 * 16;
    res = xf + d.hidden * 4;
    att = res + (rows * 4 + 15) / 16 * 16;
    cs = att + (parts > attention_scratch ? parts : attention_scratch) * 4;
    table = cs + d.head_dim * 4;
    scratch = table + kTableCache * 4;
    bars = scratch + 32 * 4;
    layer_table = (bars + 2 * 8 + 15) / 16 * 16;  // pointers: aligned on purpose
    total = layer_table + d.layers * static_cast<int>(sizeof(PersistentLayer));
  }
};

}  // namespace rtgen::kernels::persistent
