#pragma once
// A random paged KV cache and the fp64 attention over it that the attention kernels' GPU tests
// compare against (host code).

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace rtgen::testing_gpu {

struct Cache {
  int num_blocks, block_size, kv_heads, hd, max_blocks;
  std::vector<uint16_t> k, v;   // bf16 [num_blocks, block_size, kv_heads, hd]
  std::vector<int32_t> tables;  // [seqs, max_blocks]
};

// The cache's shape as an attention launch takes it (decode and prefill parameters name these
// fields alike): `heads` query heads over c's kv heads and blocks, the scale 1 / sqrt(head_dim).
template <typename Params>
void SetCacheShape(const Cache& c, int heads, Params* p) {
  p->num_heads = heads;
  p->num_kv_heads = c.kv_heads;
  p->head_dim = c.hd;
  p->block_size = c.block_size;
  p->max_blocks_per_seq = c.max_blocks;
  p->scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
}

// Random cache; each sequence gets distinct random blocks for its context.
Cache MakeCache(const std::vector<int32_t>& ctx, int block_size, int kv_heads, int hd,
                std::mt19937_64& rng);

// Sequence s's attention over its first `len` keys, in fp64, for the query rows q (bf16, `heads`
// rows of c.hd): out[h * c.hd + i] (zeros when len is 0).
void Reference(const Cache& c, int s, int len, const uint16_t* q, int heads, float scale,
               double* out);

}  // namespace rtgen::testing_gpu
