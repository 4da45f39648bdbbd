// The qkv GEMV with RoPE and the KV store in its epilogue (kernels/gemv.h GemvRopeKvStore)
// against what it replaces: Gemv with the same launch shape, then RopeKvStore. Every output bit
// must match: the qkv rows (rotated q and k, plain v) and both caches, whose slots the step does
// not name must keep their poison; padding rows (slot -1) write no cache slot. Shapes: the three
// Llama shapes the engine runs, tiny heads (head_dim 8) and head_dim 256, every batch row count
// of the GEMV (sliced ones too), several launch shapes (the two one-row kernels of large weights
// among them).

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "gtest/gtest.h"
#include "kernels/gemv.h"
#include "kernels/rope.h"
#include "kernels/rope_inv_freq.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct QkvShape {
  int heads, kv_heads, head_dim, k;
};

class GemvRopeTest : public ::testing::TestWithParam<QkvShape> {};

TEST_P(GemvRopeTest, MatchesGemvThenRopeKvStoreBitForBit) {
  const QkvShape s = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int q_dim = s.heads * s.head_dim, kv_dim = s.kv_heads * s.head_dim;
  const int n = q_dim + 2 * kv_dim, max_m = kernels::kGemvMaxSlicedRows;
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * max_m * s.k, 1.0f, rng));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * n * s.k, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w);
  ModelConfig c = TinyConfig();
  c.head_dim = s.head_dim;
  DeviceArray<float> d_freq(kernels::RopeInvFreq(c));
  const int num_slots = 2 * max_m + 3;
  const size_t cache_elems = size_t{1} * num_slots * kv_dim;
  // Long rows are slow to check on the host at every m: a few row counts then.
  std::vector<int> ms = GemvRowCounts();
  if (int64_t{n} * s.k > (int64_t{8} << 20)) ms = {1, 3, 8, 9, 16, 24};
  // m = 1 twice: the second time its one row is padding (slot -1) and writes no cache slot.
  ms.insert(ms.begin(), 1);
  for (size_t mi = 0; mi < ms.size(); ++mi) {
    const int m = ms[mi];
    std::vector<int32_t> pos(m), slots(num_slots);
    std::uniform_int_distribution<int32_t> pd(0, 100000);
    for (int32_t& p : pos) p = pd(rng);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(m);
    if (m > 3) slots[2] = -1;  // a padding row
    if (mi == 1) slots[0] = -1;
    DeviceArray<int32_t> d_pos(pos), d_slots(slots);
    for (const kernels::GemvTuning t :
         {kernels::GemvTuning{0, 0}, kernels::GemvTuning{1, 2}, kernels::GemvTuning{2, 4},
          kernels::GemvTuning{8, 8}, kernels::GemvTuning{0, 0, -1, true},
          kernels::GemvTuning{0, 0, -1, true, true}}) {
      if (t.rows && m != 1) continue;  // the one-row kernels take one input row
      if (t.slab && s.k % 1024 != 0) continue;  // the slab kernel's warps read 1024-element spans
      SCOPED_TRACE(::testing::Message() << "m=" << m << " slot0=" << slots[0]
                                        << " warps=" << t.warps << " unroll=" << t.unroll
                                        << " rows=" << t.rows << " slab=" << t.slab);
      const kernels::GemvTuning launch = t.warps == 0 && !t.rows
          ? kernels::GemvDefaultTuning({d_x.bf16(), d_w.bf16(), nullptr, false, m, n, s.k})
          : t;
      DeviceArray<uint16_t> plain_y(size_t{1} * m * n), plain_k(cache_elems),
          plain_v(cache_elems);
      DeviceArray<uint16_t> fused_y(size_t{1} * m * n), fused_k(cache_elems),
          fused_v(cache_elems);
      const kernels::GemvParams pp{d_x.bf16(), d_w.bf16(), plain_y.get(), false, m, n, s.k};
      ASSERT_EQ(kernels::GemvTuned(pp, launch, nullptr), cudaSuccess);
      const kernels::RopeParams rope{plain_y.bf16(), plain_y.bf16() + q_dim, n, d_pos.get(),
                                     d_freq.get(), m, s.heads, s.kv_heads, s.head_dim};
      const kernels::KvStoreParams store{plain_y.bf16() + q_dim, plain_y.bf16() + q_dim + kv_dim,
                                         n, plain_k.bf16(), plain_v.bf16(), d_slots.get(), m,
                                         kv_dim};
      ASSERT_EQ(kernels::RopeKvStore(rope, store, nullptr), cudaSuccess);

      const kernels::GemvParams fp{d_x.bf16(), d_w.bf16(), fused_y.get(), false, m, n, s.k};
      const kernels::GemvRopeParams r{d_pos.get(),    d_freq.get(),   d_slots.get(),
                                      fused_k.bf16(), fused_v.bf16(), s.heads,
                                      s.kv_heads,     s.head_dim};
      ASSERT_TRUE(kernels::GemvRopeKvStoreSupported(fp, r));
      const cudaError_t err = t.warps == 0 && !t.rows
                                  ? kernels::GemvRopeKvStore(fp, r, nullptr)
                                  : kernels::GemvRopeKvStoreTuned(fp, r, t, nullptr);
      ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);

      const std::vector<uint16_t> want_y = plain_y.ToHost(), got_y = fused_y.ToHost();
      ASSERT_EQ(got_y, want_y);
      // The unfused pair wrote every element (no poison left), so the fused kernel did too.
      ASSERT_EQ(std::count(want_y.begin(), want_y.end(), uint16_t{0xffff}), 0);
      const std::vector<uint16_t> want_k = plain_k.ToHost(), want_v = plain_v.ToHost();
      ASSERT_EQ(fused_k.ToHost(), want_k);
      ASSERT_EQ(fused_v.ToHost(), want_v);
      // The caches hold exactly the named slots: the rest is still poison.
      const size_t written = static_cast<size_t>(std::count_if(
          slots.begin(), slots.end(), [](int32_t sl) { return sl >= 0; }));
      const size_t poison = static_cast<size_t>(
          std::count(want_k.begin(), want_k.end(), uint16_t{0xffff}));
      ASSERT_EQ(poison, (num_slots - written) * kv_dim);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvRopeTest,
                         ::testing::Values(QkvShape{9, 3, 64, 576},     // SmolLM2-135M
                                           QkvShape{32, 8, 64, 2048},   // Llama-3.2-1B
                                           QkvShape{32, 8, 128, 4096},  // Llama-3-8B
                                           QkvShape{3, 1, 8, 40},       // one pair group per head
                                           QkvShape{4, 2, 256, 72}));   // the largest head_dim

TEST(GemvRopeTest, RejectsUnsupportedShapes) {
  DeviceArray<uint16_t> buf(4096);
  DeviceArray<int32_t> ints(16);
  DeviceArray<float> freq(128);
  const auto* x = buf.bf16();
  const kernels::GemvParams p{x, x, buf.get(), false, 1, (4 + 2 * 2) * 8, 64};
  const kernels::GemvRopeParams r{ints.get(), freq.get(), ints.get(), buf.bf16(), buf.bf16(),
                                  4, 2, 8};
  EXPECT_TRUE(kernels::GemvRopeKvStoreSupported(p, r));
  kernels::GemvParams q = p;
  q.n += 8;  // not (heads + 2 kv heads) * head_dim
  EXPECT_FALSE(kernels::GemvRopeKvStoreSupported(q, r));
  EXPECT_EQ(kernels::GemvRopeKvStore(q, r, nullptr), cudaErrorInvalidValue);
  q = p;
  q.y_f32 = true;
  EXPECT_FALSE(kernels::GemvRopeKvStoreSupported(q, r));
  kernels::GemvRopeParams bad = r;
  bad.head_dim = 12;  // tiles of 4 pairs need head_dim % 8 == 0
  q = p;
  q.n = (4 + 2 * 2) * 12;
  EXPECT_FALSE(kernels::GemvRopeKvStoreSupported(q, bad));
  bad = r;
  bad.slot_mapping = nullptr;
  EXPECT_FALSE(kernels::GemvRopeKvStoreSupported(p, bad));
}

// Where the tensor-core RoPE GEMV releases decode attention before its main loop by default:
// head_dim 64 with a weight of 8 MiB or more (Llama-3.2-1B's qkv, 12 MiB), not SmolLM2-135M's
// (1.1 MB) nor head_dim 128's (8-warp attention blocks); the row-streaming kernel (weights of 24
// MiB or more with 4096+ features, Llama-3-8B's qkv at one row) always. A host-side rule: no
// launch.
TEST(GemvRopeTest, ReleasesAttentionEarlyWhereItsTilesHaveTimeToArrive) {
  for (const char* name : {"RTGEN_TC_ROPE_EARLY_DEPENDENTS", "RTGEN_ROPE_EARLY_DEPENDENTS",
                           "RTGEN_GEMV_ROWS_MIN_MB"}) {
    if (std::getenv(name) != nullptr) GTEST_SKIP() << name << " is set: not the default rule";
  }
  const auto params = [](int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim,
                         int32_t hidden) {
    return kernels::GemvParams{nullptr, nullptr, nullptr, false, m,
                               (heads + 2 * kv_heads) * head_dim, hidden};
  };
  for (const int32_t m : {1, 4, 16}) {
    SCOPED_TRACE(m);
    EXPECT_TRUE(kernels::GemvRopeReleasesEarly(params(m, 32, 8, 64, 2048), 64));    // 1B
    EXPECT_FALSE(kernels::GemvRopeReleasesEarly(params(m, 9, 3, 64, 576), 64));     // SmolLM2
    EXPECT_FALSE(kernels::GemvRopeReleasesEarly(params(m, 16, 8, 128, 2048), 128));  // 16 MiB
    EXPECT_TRUE(kernels::GemvRopeReleasesEarly(params(m, 16, 8, 64, 2048), 64));  // 8 MiB
    EXPECT_FALSE(kernels::GemvRopeReleasesEarly(params(m, 16, 8, 64, 2040), 64));  // just under
  }
  EXPECT_TRUE(kernels::GemvRopeReleasesEarly(params(1, 32, 8, 128, 4096), 128));  // 8B, rows
}

}  // namespace
}  // namespace rtgen::testing_gpu
