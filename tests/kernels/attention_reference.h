#pragma once
// A random paged KV cache and the fp64 attention over it that the attention kernels' GPU tests
// compare against (host code).

#include <cstdint>
#include <random>
#include <vector>

namespace rtgen::testing_gpu {

struct Cache {
  int num_blocks, block_size, kv_heads, hd, max_blocks;
  std::vector<uint16_t> k, v;   // bf16 [num_blocks, block_size, kv_heads, hd]
  std::vector<int32_t> tables;  // [seqs, max_blocks]
};

// Random cache; each sequence gets distinct random blocks for its context.
Cache MakeCache(const std::vector<int32_t>& ctx, int block_size, int kv_heads, int hd,
                std::mt19937_64& rng);

// Sequence s's attention over its first `len` keys, in fp64, for the query rows q (bf16, `heads`
// rows of c.hd): out[h * c.hd + i] (zeros when len is 0).
void Reference(const Cache& c, int s, int len, const uint16_t* q, int heads, float scale,
               double* out);

}  // namespace rtgen::testing_gpu
