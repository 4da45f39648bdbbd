#include "tests/kernels/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {

Cache MakeCache(const std::vector<int32_t>& ctx, int block_size, int kv_heads, int hd,
                std::mt19937_64& rng) {
  Cache c{0, block_size, kv_heads, hd, 1, {}, {}, {}};
  int total = 0;
  for (int32_t n : ctx) {
    const int b = (n + block_size - 1) / block_size;
    total += b;
    c.max_blocks = std::max(c.max_blocks, b);
  }
  c.num_blocks = total + 3;
  const size_t elems = size_t{1} * c.num_blocks * block_size * kv_heads * hd;
  c.k = ToBf16(RandomNormal(elems, 1.0f, rng));
  c.v = ToBf16(RandomNormal(elems, 1.0f, rng));
  std::vector<int32_t> perm(c.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.tables.assign(ctx.size() * c.max_blocks, -1);
  int next = 0;
  for (size_t s = 0; s < ctx.size(); ++s) {
    for (int j = 0; j < (ctx[s] + block_size - 1) / block_size; ++j) {
      c.tables[s * c.max_blocks + j] = perm[next++];
    }
  }
  return c;
}

void Reference(const Cache& c, int s, int len, const uint16_t* q, int heads, float scale,
               double* out) {
  const int group = heads / c.kv_heads;
  for (int h = 0; h < heads; ++h) {
    const int kvh = h / group;
    std::vector<double> score(len);
    double m = -INFINITY;
    for (int p = 0; p < len; ++p) {
      const size_t slot = size_t{1} * c.tables[s * c.max_blocks + p / c.block_size] * c.block_size +
                          p % c.block_size;
      const size_t base = (slot * c.kv_heads + kvh) * c.hd;
      double d = 0.0;
      for (int i = 0; i < c.hd; ++i) d += FromBf16(q[h * c.hd + i]) * FromBf16(c.k[base + i]);
      score[p] = d * scale;
      m = std::max(m, score[p]);
    }
    double l = 0.0;
    for (double& x : score) l += (x = std::exp(x - m));
    for (int i = 0; i < c.hd; ++i) {
      double acc = 0.0;
      for (int p = 0; p < len; ++p) {
        const size_t slot = size_t{1} * c.tables[s * c.max_blocks + p / c.block_size] *
                                c.block_size + p % c.block_size;
        acc += score[p] * FromBf16(c.v[(slot * c.kv_heads + kvh) * c.hd + i]);
      }
      out[h * c.hd + i] = len > 0 ? acc / l : 0.0;
    }
  }
}

}  // namespace rtgen::testing_gpu
