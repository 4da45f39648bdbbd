// Paged decode attention (with and without KV splits) against an fp64 reference over the same
// bf16 cache.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_attention_mma.h"
#include "kernels/kv_store.h"
#include "kernels/rope.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/decode_launch.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/slow_kv_writer.h"

namespace rtgen::testing_gpu {
namespace {

struct AttnShape {
  int heads, kv_heads, hd, block_size;
  std::vector<int32_t> ctx;
  int splits;  // decode: 1 or a forced split count (0: the planner's choice)
  int min_partition = kernels::kDefaultMinPartition;  // the planner's granule
};

class DecodeAttentionTest : public ::testing::TestWithParam<AttnShape> {};

// Keys made to dominate one query head's scores each (k = 2q: a score of 2 sqrt(head_dim) against
// ~N(0, 1) for the random keys), so an output that drops or doubles one of them is off by O(1),
// not by the ~1 / sqrt(e N) that a near-uniform attention over N random keys hides under the 1e-2
// tolerance once N is in the thousands (0.0105 at 3000 keys). Per sequence: its last key, its
// first, and up to four keys on either side of a 64-key tile or a `partition`-key partition edge,
// each for the query heads (of every kv head) in turn.
void PlantDominantKeys(const std::vector<int32_t>& ctx, const std::vector<uint16_t>& q, int stride,
                       int heads, int partition, std::mt19937_64& rng, Cache* c) {
  const int group = heads / c->kv_heads;
  for (size_t s = 0; s < ctx.size(); ++s) {
    const int n = ctx[s];
    if (n == 0) continue;
    std::vector<int> edges;
    for (const int unit : {64, partition}) {
      for (int m = unit; unit > 0 && m < n; m += unit) {
        edges.push_back(m - 1);
        edges.push_back(m);
      }
    }
    std::shuffle(edges.begin(), edges.end(), rng);
    std::vector<int> keys = {n - 1, 0};
    for (size_t i = 0; i < edges.size() && keys.size() < 6; ++i) keys.push_back(edges[i]);
    for (size_t j = 0; j < keys.size(); ++j) {
      const int p = keys[j];
      const size_t block = static_cast<size_t>(c->tables[s * c->max_blocks + p / c->block_size]);
      for (int g = 0; g < c->kv_heads; ++g) {
        const int h = g * group + static_cast<int>(j) % group;
        const uint16_t* qh = q.data() + s * stride + size_t{1} * h * c->hd;
        uint16_t* k = c->k.data() +
                      ((block * c->block_size + p % c->block_size) * c->kv_heads + g) * c->hd;
        for (int i = 0; i < c->hd; ++i) k[i] = ToBf16(2.0f * FromBf16(qh[i]));
      }
    }
  }
}

TEST_P(DecodeAttentionTest, MatchesReference) {
  const AttnShape a = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int seqs = static_cast<int>(a.ctx.size());
  Cache c = MakeCache(a.ctx, a.block_size, a.kv_heads, a.hd, rng);
  const int q_dim = a.heads * a.hd, stride = q_dim + 2 * a.kv_heads * a.hd;
  const std::vector<uint16_t> q = ToBf16(RandomNormal(size_t{1} * seqs * stride, 1.0f, rng));
  const int max_ctx = c.max_blocks * a.block_size;
  kernels::DecodeSplitPlan plan;
  if (a.splits == 0) {
    plan = kernels::PlanDecodeSplits(seqs, a.kv_heads, max_ctx, 132, a.min_partition);
  } else if (a.splits > 1) {
    plan.num_splits = a.splits;
    plan.partition_size = (max_ctx + a.splits - 1) / a.splits;
  }
  PlantDominantKeys(a.ctx, q, stride, a.heads, plan.num_splits > 1 ? plan.partition_size : 0,
                    rng, &c);
  DeviceArray<uint16_t> d_q(q), d_k(c.k), d_v(c.v);
  DeviceArray<int32_t> d_tables(c.tables), d_ctx(a.ctx);
  DeviceArray<uint16_t> d_out(size_t{1} * seqs * q_dim);
  const size_t parts = size_t{1} * seqs * a.heads * plan.num_splits;
  DeviceArray<float> d_po(parts * a.hd), d_ml(parts * 2);
  kernels::DecodeAttentionParams p = DecodeParams(
      c, seqs, a.heads, plan, {d_q, stride, d_k, d_v, d_tables, d_ctx, d_out, d_po, d_ml});
  std::vector<double> want(size_t{1} * seqs * q_dim), last_dropped(want.size());
  for (int s = 0; s < seqs; ++s) {
    Reference(c, s, a.ctx[s], q.data() + size_t{1} * s * stride, a.heads, p.scale,
              want.data() + size_t{1} * s * q_dim);
    Reference(c, s, std::max(a.ctx[s] - 1, 0), q.data() + size_t{1} * s * stride, a.heads,
              p.scale, last_dropped.data() + size_t{1} * s * q_dim);
  }
  // The test could tell: the outputs without each sequence's last key are far off.
  const std::vector<float> dropped(last_dropped.begin(), last_dropped.end());
  EXPECT_GT(RelL2(dropped, want), 0.05);
  // On tensor cores where they apply, then always on CUDA cores: each a separate combine launch
  // (counters null), then the in-kernel merge, launched twice: the counters must come back to
  // zero, and the second launch must repeat the first bit for bit.
  const std::vector<int32_t> zeros(size_t{1} * seqs * a.heads, 0);
  DeviceArray<int32_t> d_counters(zeros);
  std::vector<uint16_t> merged_first, tensor_core_merged;
  for (int run = 0; run < 6; ++run) {
    p.tensor_cores = run < 3;
    SCOPED_TRACE(run % 3 == 0 ? "combine kernel" : "in-kernel merge");
    SCOPED_TRACE(p.tensor_cores ? "tensor cores where they apply" : "CUDA cores");
    p.counters = run % 3 == 0 ? nullptr : d_counters.get();
    DeviceArray<uint16_t> d_run_out(size_t{1} * seqs * q_dim);  // poisoned
    p.out = d_run_out.bf16();
    GPU_CHECK(kernels::DecodeAttention(p, nullptr));
    const std::vector<uint16_t> bits = d_run_out.ToHost();
    const std::vector<float> out = FromBf16(bits);
    EXPECT_LE(RelL2(out, want), 1e-2) << "splits " << plan.num_splits;
    for (int s = 0; s < seqs; ++s) {
      if (a.ctx[s] != 0) continue;
      for (int i = 0; i < q_dim; ++i) ASSERT_EQ(out[size_t{1} * s * q_dim + i], 0.0f);
    }
    if (run % 3 == 1) merged_first = bits;
    if (run == 1) tensor_core_merged = bits;
    if (run % 3 == 2) {
      EXPECT_EQ(bits, merged_first);
    }
    if (run % 3 > 0) {
      EXPECT_EQ(d_counters.ToHost(), zeros);
    }
  }
  // K/V tiles copied before the PDL wait (nothing is written here): within the tolerance, the
  // same bits launched twice, and the same bits as without the copies where the launch keeps its
  // warps (at head_dim 64 it may take 16-warp blocks, which sum in another order).
  p.tensor_cores = true;
  p.prefetch_kv = false;
  const bool mma = kernels::DecodeAttentionMmaSupports(p);
  const int plain_warps = mma ? kernels::DecodeAttentionMmaWarps(p) : 0;
  p.prefetch_kv = true;
  const int prefetch_warps = mma ? kernels::DecodeAttentionMmaWarps(p) : 0;
  ASSERT_GE(plain_warps, 0);
  ASSERT_GE(prefetch_warps, 0);
  p.counters = d_counters.get();
  std::vector<uint16_t> prefetched_first;
  for (int launch = 0; launch < 2; ++launch) {
    DeviceArray<uint16_t> d_prefetched(size_t{1} * seqs * q_dim);
    p.out = d_prefetched.bf16();
    GPU_CHECK(kernels::DecodeAttention(p, nullptr));
    const std::vector<uint16_t> bits = d_prefetched.ToHost();
    EXPECT_LE(RelL2(FromBf16(bits), want), 1e-2) << "prefetch_kv";
    if (launch == 0) prefetched_first = bits;
    if (launch == 1) {
      EXPECT_EQ(bits, prefetched_first) << "prefetch_kv, launched again";
    }
    EXPECT_EQ(d_counters.ToHost(), zeros);
  }
  if (prefetch_warps == plain_warps) {
    EXPECT_EQ(prefetched_first, tensor_core_merged) << "prefetch_kv, " << plain_warps << " warps";
  } else {
    EXPECT_EQ(prefetch_warps, 16) << "only 16-warp blocks come from prefetch_kv alone";
  }
}

// A decode batch: query heads, kv heads, head_dim and each sequence's context length.
struct DecodeCase {
  int heads, kv_heads, hd;
  std::vector<int32_t> ctx;
};

// The cache slot of each sequence's newest key (position ctx - 1) in cache c.
std::vector<int32_t> NewestSlots(const Cache& c, const std::vector<int32_t>& ctx) {
  std::vector<int32_t> slots(ctx.size());
  for (size_t s = 0; s < ctx.size(); ++s) {
    const int pos = ctx[s] - 1;
    slots[s] = c.tables[s * c.max_blocks + pos / c.block_size] * c.block_size + pos % c.block_size;
  }
  return slots;
}

// prefetch_kv: each sequence's newest key is written by the launch just before (as the qkv
// projection does in a decode step) and must be read after the wait, the older keys may be copied
// before it. The writer (SlowKvStore) releases attention at once and writes 20 us later, so a
// copy of the newest key taken before the wait reads the previous round's values. Repeated with
// fresh newest keys at SmolLM2-135M's and Llama-3-8B's heads, contexts around the key tiles (at
// SmolLM2's, 16-warp blocks: 600 puts the newest key past the two tiles copied before the wait).
TEST(DecodeAttentionPrefetchTest, ReadsTheNewestKeyAfterTheLaunchThatWritesIt) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (const DecodeCase& a :
       {DecodeCase{9, 3, 64, {190, 1, 128, 129, 257, 600}}, DecodeCase{32, 8, 128, {200}}}) {
    const int seqs = static_cast<int>(a.ctx.size()), block_size = 16;
    const int kv_dim = a.kv_heads * a.hd, q_dim = a.heads * a.hd;
    Cache c = MakeCache(a.ctx, block_size, a.kv_heads, a.hd, rng);
    const std::vector<uint16_t> q = ToBf16(RandomNormal(size_t{1} * seqs * q_dim, 1.0f, rng));
    const std::vector<int32_t> slots = NewestSlots(c, a.ctx);
    // Planned for 132 SMs (key partitions) and for one (none: a partition of more tiles than
    // are copied before the wait).
    for (const int32_t sms : {132, 1}) {
      const kernels::DecodeSplitPlan plan =
          kernels::PlanDecodeSplits(seqs, a.kv_heads, c.max_blocks * block_size, sms);
      DeviceArray<uint16_t> d_q(q), d_k(c.k), d_v(c.v), d_out(size_t{1} * seqs * q_dim);
      DeviceArray<int32_t> d_tables(c.tables), d_ctx(a.ctx), d_slots(slots);
      const size_t parts = size_t{1} * seqs * a.heads * plan.num_splits;
      DeviceArray<float> d_po(parts * a.hd), d_ml(parts * 2);
      DeviceArray<int32_t> d_counters(std::vector<int32_t>(size_t{1} * seqs * a.heads, 0));
      kernels::DecodeAttentionParams p = DecodeParams(
          c, seqs, a.heads, plan, {d_q, q_dim, d_k, d_v, d_tables, d_ctx, d_out, d_po, d_ml});
      p.counters = d_counters.get();
      p.prefetch_kv = true;
      cudaStream_t stream;
      GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      // The arrays were filled on the legacy stream, which a non-blocking one does not wait for.
      GPU_CHECK(cudaDeviceSynchronize());
      for (int round = 0; round < 8; ++round) {
        SCOPED_TRACE(round);
        // Fresh newest keys and values, far from the old ones (scale 4).
        const std::vector<uint16_t> nk = ToBf16(RandomNormal(size_t{1} * seqs * kv_dim, 4.0f, rng));
        const std::vector<uint16_t> nv = ToBf16(RandomNormal(size_t{1} * seqs * kv_dim, 4.0f, rng));
        DeviceArray<uint16_t> d_nk(nk), d_nv(nv);
        GPU_CHECK(cudaDeviceSynchronize());  // as above
        GPU_CHECK(SlowKvStore({d_nk.bf16(), d_nv.bf16(), kv_dim, d_k.bf16(), d_v.bf16(),
                               d_slots.get(), seqs, kv_dim},
                              20000, stream));
        GPU_CHECK(kernels::DecodeAttention(p, stream));
        for (int s = 0; s < seqs; ++s) {
          std::copy(nk.begin() + size_t{1} * s * kv_dim, nk.begin() + size_t{1} * (s + 1) * kv_dim,
                    c.k.begin() + size_t{1} * slots[s] * kv_dim);
          std::copy(nv.begin() + size_t{1} * s * kv_dim, nv.begin() + size_t{1} * (s + 1) * kv_dim,
                    c.v.begin() + size_t{1} * slots[s] * kv_dim);
        }
        std::vector<double> want(size_t{1} * seqs * q_dim);
        for (int s = 0; s < seqs; ++s) {
          Reference(c, s, a.ctx[s], q.data() + size_t{1} * s * q_dim, a.heads, p.scale,
                    want.data() + size_t{1} * s * q_dim);
        }
        const double err = RelL2(FromBf16(d_out.ToHost()), want);
        if (err > 1e-2) GPU_CHECK(cudaStreamDestroy(stream));
        ASSERT_LE(err, 1e-2) << a.heads << " heads, " << sms << " SMs";
      }
      GPU_CHECK(cudaStreamDestroy(stream));
    }
  }
}

// DecodeAttentionParams::rope: attention over unrotated qkv rows that rotates q and the newest
// key and stores that key and its value itself gives the same output and the same caches, bit for
// bit, as RopeKvStore followed by attention (which other tests hold to the fp64 reference). At
// SmolLM2-135M's heads (8-warp blocks, key partitions) and Llama-3-8B's at 64 sequences (2-warp
// blocks), the newest key in the first tile and in later ones; a sequence whose slot is -1 stores
// nothing and reads its newest key from the cache.
TEST(DecodeAttentionRopeTest, MatchesRopeKvStoreThenAttention) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> many(64);
  for (int i = 0; i < 64; ++i) many[i] = 1 + i * 37 % 300;
  for (const DecodeCase& a :
       {DecodeCase{9, 3, 64, {190, 1, 128, 129, 257, 700}}, DecodeCase{32, 8, 128, many}}) {
    SCOPED_TRACE(testing::Message() << a.heads << " heads");
    const int seqs = static_cast<int>(a.ctx.size()), block_size = 16;
    const int kv_dim = a.kv_heads * a.hd, q_dim = a.heads * a.hd, stride = q_dim + 2 * kv_dim;
    Cache c = MakeCache(a.ctx, block_size, a.kv_heads, a.hd, rng);
    const std::vector<uint16_t> qkv = ToBf16(RandomNormal(size_t{1} * seqs * stride, 1.0f, rng));
    std::vector<int32_t> positions(seqs), slots = NewestSlots(c, a.ctx);
    for (int s = 0; s < seqs; ++s) positions[s] = a.ctx[s] - 1;
    slots[seqs / 2] = -1;
    std::vector<float> inv_freq(a.hd / 2);
    for (int i = 0; i < a.hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / a.hd);
    const kernels::DecodeSplitPlan plan =
        kernels::PlanDecodeSplits(seqs, a.kv_heads, c.max_blocks * block_size, 132);
    DeviceArray<int32_t> d_tables(c.tables), d_ctx(a.ctx), d_pos(positions), d_slots(slots);
    DeviceArray<float> d_freq(inv_freq);
    const size_t parts = size_t{1} * seqs * a.heads * plan.num_splits;
    DeviceArray<float> d_po(parts * a.hd), d_ml(parts * 2);
    DeviceArray<int32_t> d_counters(std::vector<int32_t>(size_t{1} * seqs * a.heads, 0));
    // Two copies of everything a path writes: the qkv rows, the caches, the output.
    DeviceArray<uint16_t> qkv_sep(qkv), qkv_fused(qkv), k_sep(c.k), k_fused(c.k), v_sep(c.v),
        v_fused(c.v), out_sep(size_t{1} * seqs * q_dim), out_fused(size_t{1} * seqs * q_dim);
    const kernels::RopeParams rope{qkv_sep.bf16(), qkv_sep.bf16() + q_dim, stride, d_pos.get(),
                                   d_freq.get(),   seqs,                   a.heads, a.kv_heads,
                                   a.hd};
    const kernels::KvStoreParams store{qkv_sep.bf16() + q_dim, qkv_sep.bf16() + q_dim + kv_dim,
                                       stride,           k_sep.bf16(),
                                       v_sep.bf16(),     d_slots.get(),
                                       seqs,             kv_dim};
    GPU_CHECK(kernels::RopeKvStore(rope, store, nullptr));
    kernels::DecodeAttentionParams p = DecodeParams(
        c, seqs, a.heads, plan, {qkv_sep, stride, k_sep, v_sep, d_tables, d_ctx, out_sep, d_po,
                                 d_ml});
    p.counters = d_counters.get();
    GPU_CHECK(kernels::DecodeAttention(p, nullptr));
    p = DecodeParams(c, seqs, a.heads, plan,
                     {qkv_fused, stride, k_fused, v_fused, d_tables, d_ctx, out_fused, d_po, d_ml});
    p.counters = d_counters.get();
    p.rope = {qkv_fused.bf16() + q_dim, qkv_fused.bf16() + q_dim + kv_dim, d_pos.get(),
              d_freq.get(), d_slots.get(), k_fused.bf16(), v_fused.bf16()};
    GPU_CHECK(kernels::DecodeAttention(p, nullptr));
    EXPECT_EQ(out_fused.ToHost(), out_sep.ToHost());
    EXPECT_EQ(k_fused.ToHost(), k_sep.ToHost());
    EXPECT_EQ(v_fused.ToHost(), v_sep.ToHost());
    // Refused where it cannot run: on CUDA cores, or with prefetch_kv.
    p.tensor_cores = false;
    EXPECT_EQ(kernels::DecodeAttention(p, nullptr), cudaErrorInvalidValue);
    p.tensor_cores = true;
    p.prefetch_kv = true;
    EXPECT_EQ(kernels::DecodeAttention(p, nullptr), cudaErrorInvalidValue);
  }
}

// n context lengths spread over [0, mod): i * step % mod.
std::vector<int32_t> SpreadContexts(int n, int step, int mod) {
  std::vector<int32_t> ctx(n);
  for (int i = 0; i < n; ++i) ctx[i] = i * step % mod;
  return ctx;
}

// The tensor-core kernel's blocks at the 2-warp grids of the shapes below, so that each of its
// two- and three-stage variants is run against the reference there. The grids are sized for
// 132 SMs with an H100's or H200's shared memory (4-warp blocks: 396 at head_dim 128, 528 at 64;
// 2-warp blocks with three stages: 528 and 924).
TEST(DecodeAttentionMmaTest, TwoWarpGridsOfTheShapesTakeBothStageCounts) {
  int device = 0, sms = 0;
  GPU_CHECK(cudaGetDevice(&device));
  GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (sms != 132) GTEST_SKIP() << "the shapes' grids are sized for 132 SMs, this GPU has " << sms;
  struct Grid {
    int heads, kv_heads, hd, seqs, splits, stages;
  };
  for (const Grid& g : {Grid{32, 8, 128, 64, 1, 3}, Grid{32, 8, 128, 80, 1, 2},
                        Grid{9, 3, 64, 250, 1, 3}, Grid{9, 3, 64, 100, 2, 3},
                        Grid{9, 3, 64, 400, 1, 2}, Grid{9, 3, 64, 100, 4, 2}}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << g.hd << ", " << g.kv_heads * g.seqs *
                                             g.splits << " blocks");
    kernels::DecodeAttentionParams p;
    p.num_heads = g.heads;
    p.num_kv_heads = g.kv_heads;
    p.head_dim = g.hd;
    p.num_seqs = g.seqs;
    p.num_splits = g.splits;
    ASSERT_TRUE(kernels::DecodeAttentionMmaSupports(p));
    EXPECT_EQ(kernels::DecodeAttentionMmaWarps(p), 2);
    EXPECT_EQ(kernels::DecodeAttentionMmaStages(p), g.stages);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeAttentionTest,
    ::testing::Values(AttnShape{9, 3, 64, 16, {1, 17, 300, 0}, 1},
                      AttnShape{9, 3, 64, 16, {2000, 5, 0, 1023}, 4},
                      AttnShape{32, 8, 128, 16, {3000}, 0},
                      AttnShape{32, 8, 128, 32, {700, 1, 129}, 3},
                      AttnShape{4, 4, 256, 16, {100, 257}, 1},
                      AttnShape{4, 1, 32, 8, {1500, 64, 0}, 7},
                      // Batch 1 in the model: many partitions, keys in one (written directly);
                      // both grids past what 8-warp blocks hold at once (4 warps).
                      AttnShape{32, 8, 128, 16, {4096, 100}, 16},
                      AttnShape{15, 5, 64, 16, {257, 4000, 256, 3}, 16},
                      // A 32-key granule at short contexts: partitions sized from each
                      // sequence's own length, several holding keys.
                      AttnShape{9, 3, 64, 16, {130}, 0, 32},
                      AttnShape{32, 8, 128, 16, {256, 7}, 0, 32},
                      AttnShape{32, 8, 128, 16, {3000, 33}, 0, 32},
                      // head_dim 256 with a group of 8: two blocks of 4 query heads per kv head.
                      AttnShape{16, 2, 256, 16, {300, 40}, 0, 32},
                      // The tensor-core kernel (head_dim 64 and 128; 8-warp blocks while the grid
                      // fits at once, as most shapes here: 128-key tiles, else 4 or 2 warps; 16
                      // at head_dim 64 with prefetch_kv, DecodeAttentionPrefetchTest):
                      // groups of 4, 8, 16 and 1; contexts around the key tiles; a block table
                      // past the 512 entries kept in shared memory ({9000}); groups past the
                      // warp count in the last-block merge (8 and 16 with splits).
                      AttnShape{32, 8, 128, 16, {64, 0, 1, 63, 65, 200, 300, 128, 129, 2}, 1},
                      AttnShape{32, 4, 128, 32, {700, 1, 129}, 1},
                      AttnShape{16, 1, 64, 16, {513, 2}, 1},
                      AttnShape{8, 8, 128, 16, {100, 5}, 1},
                      AttnShape{9, 3, 64, 16, {9000, 3}, 1},
                      AttnShape{32, 8, 128, 16, {9000}, 1},
                      AttnShape{32, 4, 64, 16, {700, 1, 129}, 3},
                      AttnShape{16, 1, 64, 16, {513, 2}, 5},
                      // Grids past what 4-warp blocks hold at once (H200: 396 blocks at
                      // head_dim 128, 528 at 64): the 2-warp kernel, unsplit and split, with
                      // three stages while its blocks fit at once (H200: 528 at head_dim 128,
                      // 924 at 64), else two (640 and 1200 blocks).
                      AttnShape{32, 8, 128, 16, SpreadContexts(64, 37, 300), 1},
                      AttnShape{32, 8, 128, 16, SpreadContexts(80, 37, 300), 1},
                      AttnShape{9, 3, 64, 16, SpreadContexts(400, 13, 260), 1},
                      AttnShape{9, 3, 64, 16, SpreadContexts(100, 29, 700), 4},
                      // ...and at head_dim 64 with three stages (750 and 600 blocks: SmolLM2's
                      // decode at batch 177-308 takes this kernel), unsplit and split.
                      AttnShape{9, 3, 64, 16, SpreadContexts(250, 13, 260), 1},
                      AttnShape{9, 3, 64, 16, SpreadContexts(100, 29, 700), 2},
                      // Block sizes that are not powers of two: slots by division, not shifts
                      // (PartitionRange::Slot).
                      AttnShape{32, 8, 128, 24, {700, 1, 129, 48}, 1},
                      AttnShape{9, 3, 64, 12, {300, 13, 0}, 3},
                      // More than 32 partitions (the merges' strided loops over them): one kv
                      // head or two at batch 1-2 and a long context (47 and 36 here).
                      AttnShape{8, 1, 64, 16, {12000, 9}, 0},
                      AttnShape{16, 2, 128, 16, {9000}, 0},
                      // head_dim 80 and 96 (the CUDA-core kernel only; lanes holding no dims).
                      AttnShape{6, 2, 80, 16, {300, 1, 65}, 1},
                      AttnShape{8, 4, 96, 16, {700, 129}, 3},
                      // Groups of 32 query heads on one kv head (multi-query attention).
                      AttnShape{32, 1, 64, 16, {300, 5}, 1},
                      AttnShape{32, 1, 128, 16, {700, 2}, 3}));

}  // namespace
}  // namespace rtgen::testing_gpu
