// The MLP half of a one-token layer in one launch (kernels/fused_mlp.h) against the two linked
// GEMVs it replaces (GemvSiluMul as the FFN norm's consumer, then Gemv as the next norm's
// producer) on the same random inputs, in both of its modes: joined by its last block (the
// residual's increment, the normed row and the sum of squares within the tolerance of a
// different fp32 summation order before one bf16 rounding; pending products and counter left
// zero) and left pending (the totals against the down GEMV's products); the consumer's previous
// slot zeroed; a second launch bitwise equal to the first; shapes it cannot take refused. Then
// the GEMV's two sides of pending products (gemv.h GemvPendingRow): the qkv projection rebuilding
// its row against the same launch given that row, the o projection joining them bit for bit as
// if they were already in the residual.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/fused_mlp.h"
#include "kernels/gemv.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

constexpr float kEps = 1e-5f;

// What one launch leaves: the residual, the normed row (bf16) and the three norm slots
// (consumer's sum, the slot it zeroes, the producer's sum).
struct MlpOutputs {
  std::vector<float> residual;
  std::vector<uint16_t> normed;
  std::vector<unsigned long long> sums;
};

// Random inputs of one shape (x, weights, the residual and the next norm's weight).
struct MlpInputs {
  MlpInputs(int h, int n, std::mt19937_64& rng)
      : hidden(h),
        inter(n),
        x(ToBf16(RandomNormal(h, 1.0f, rng))),
        w_gate_up(ToBf16(RandomNormal(size_t{2} * n * h, 0.05f, rng))),
        w_down(ToBf16(RandomNormal(size_t{1} * h * n, 0.05f, rng))),
        residual(RandomNormal(h, 2.0f, rng)),
        weight(RandomUniform(h, 0.5f, 1.5f, rng)),
        fixed_in(std::llround(1.75 * h * kernels::kNormSumScale)) {}  // mean square 1.75
  int hidden = 0, inter = 0;
  DeviceArray<uint16_t> x, w_gate_up, w_down;
  std::vector<float> residual, weight;
  unsigned long long fixed_in = 0;  // the FFN norm's fixed-point sum of squares
};

// Guard cells past the row's end in every buffer a launch writes: a write past `hidden` shows.
constexpr int kGuard = 8;
constexpr float kGuardResidual = 12345.0f;
constexpr long long kGuardPending = 0x5a5a5a5a5a5aLL;

template <typename T>
std::vector<T> WithGuard(std::vector<T> v, T guard) {
  v.insert(v.end(), kGuard, guard);
  return v;
}

// Fresh output buffers for one launch: the residual as drawn, normed all ones (0xffff), slots
// {the consumer's sum, 777 (to be zeroed), 0}; guard cells after the residual and normed rows.
struct MlpBuffers {
  DeviceArray<float> residual, weight;
  DeviceArray<uint16_t> normed;
  DeviceArray<unsigned long long> sums;
  explicit MlpBuffers(const MlpInputs& in)
      : residual(WithGuard(in.residual, kGuardResidual)),
        weight(in.weight),
        normed(in.hidden + kGuard),
        sums(std::vector<unsigned long long>{in.fixed_in, 777, 0}) {}
  kernels::GemvNormLink Consumer() {
    kernels::GemvNormLink link;
    link.scale_by = sums.get();
    link.zero_after = sums.get() + 1;
    link.eps = kEps;
    return link;
  }
  kernels::GemvNormLink Producer() {
    kernels::GemvNormLink link;
    link.residual = residual.get();
    link.weight = weight.get();
    link.normed = normed.bf16();
    link.sum_sq = sums.get() + 2;
    return link;
  }
  // The rows without their guard cells, which must be as written.
  MlpOutputs ToHost() {
    MlpOutputs out{residual.ToHost(), normed.ToHost(), sums.ToHost()};
    const size_t hidden = out.residual.size() - kGuard;
    for (size_t j = hidden; j < out.residual.size(); ++j) {
      EXPECT_EQ(out.residual[j], kGuardResidual) << "residual written past the row at " << j;
      EXPECT_EQ(out.normed[j], 0xffff) << "normed written past the row at " << j;
    }
    out.residual.resize(hidden);
    out.normed.resize(hidden);
    return out;
  }
};

// The layered pair; `products` gets the down GEMV's products (fp32) from a second, unlinked
// launch on the same act.
MlpOutputs RunLayered(MlpInputs& in, std::vector<float>* products) {
  MlpBuffers b(in);
  DeviceArray<uint16_t> act(in.inter), unused(in.hidden);
  DeviceArray<float> plain(in.hidden);
  kernels::GemvParams gate_up{in.x.bf16(), in.w_gate_up.bf16(), act.get(), false, 1,
                              2 * in.inter, in.hidden, b.Consumer()};
  EXPECT_EQ(kernels::GemvSiluMul(gate_up, nullptr), cudaSuccess);
  kernels::GemvParams down{act.bf16(), in.w_down.bf16(), unused.get(), false, 1, in.hidden,
                           in.inter, b.Producer()};
  EXPECT_EQ(kernels::Gemv(down, nullptr), cudaSuccess);
  down.y = plain.get();
  down.y_f32 = true;
  down.link = {};
  EXPECT_EQ(kernels::Gemv(down, nullptr), cudaSuccess);
  *products = plain.ToHost();
  return b.ToHost();
}

// The fused launch; join: with the producer link (else the products stay in `pending`).
MlpOutputs RunFused(MlpInputs& in, int features, bool join, std::vector<long long>* pending) {
  MlpBuffers b(in);
  DeviceArray<long long> d_pending(WithGuard(std::vector<long long>(in.hidden, 0), kGuardPending));
  DeviceArray<unsigned int> arrivals(std::vector<unsigned int>{0});
  kernels::FusedMlpParams p;
  p.x = in.x.bf16();
  p.w_gate_up = in.w_gate_up.bf16();
  p.w_down = in.w_down.bf16();
  p.hidden = in.hidden;
  p.inter = in.inter;
  p.features = features;
  p.consumer = b.Consumer();
  if (join) p.producer = b.Producer();
  p.pending = d_pending.get();
  p.arrivals = arrivals.get();  // counted on and reset with a producer, untouched without
  EXPECT_TRUE(kernels::FusedMlpSupported(p));
  EXPECT_EQ(kernels::FusedMlp(p, nullptr), cudaSuccess);
  *pending = d_pending.ToHost();
  for (int j = in.hidden; j < in.hidden + kGuard; ++j) {
    EXPECT_EQ((*pending)[j], kGuardPending) << "pending written past the row at " << j;
  }
  pending->resize(in.hidden);
  if (join) {
    for (const long long v : *pending) EXPECT_EQ(v, 0);  // left zero for the next launch
  }
  EXPECT_EQ(arrivals.ToHost()[0], 0u);
  return b.ToHost();
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (const float x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(FusedMlpTest, MatchesTheLinkedGemvPair) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  struct Shape {
    int hidden, inter;
  };
  // SmolLM2-135M's; x chunks not a whole lane group (65 of 16 bytes); the largest hidden; one
  // chunk.
  for (const Shape s : {Shape{576, 1536}, Shape{520, 96}, Shape{1024, 256}, Shape{8, 64}}) {
    for (const int features : {8, 16}) {
      SCOPED_TRACE(::testing::Message() << s.hidden << " x " << s.inter << ", " << features
                                        << " features a block");
      MlpInputs in(s.hidden, s.inter, rng);
      std::vector<float> products;
      std::vector<long long> pending;
      const MlpOutputs want = RunLayered(in, &products);
      const MlpOutputs got = RunFused(in, features, true, &pending);
      std::vector<float> got_inc(s.hidden), want_inc(s.hidden);
      for (int j = 0; j < s.hidden; ++j) {
        got_inc[j] = got.residual[j] - in.residual[j];
        want_inc[j] = want.residual[j] - in.residual[j];
      }
      // One bf16 rounding of a product summed in another order: an ulp per feature, or the fp32
      // order's error where the product nearly cancels (~1e-5 of the largest increment).
      EXPECT_LE(RelL2(got_inc, want_inc), 1e-2);
      EXPECT_LE(RelL2(FromBf16(got.normed), FromBf16(want.normed)), 1e-2);
      const float floor = 1e-3f * MaxAbs(want_inc);
      for (int j = 0; j < s.hidden; ++j) {
        ASSERT_LE(std::fabs(got_inc[j] - want_inc[j]), std::fabs(want_inc[j]) / 64 + floor) << j;
      }
      EXPECT_EQ(got.sums[0], in.fixed_in);  // read, not changed
      EXPECT_EQ(got.sums[1], 0u);           // the norm before: zeroed for its next producer
      EXPECT_EQ(want.sums[1], 0u);
      const double got_sq = static_cast<double>(got.sums[2]) / kernels::kNormSumScale;
      const double want_sq = static_cast<double>(want.sums[2]) / kernels::kNormSumScale;
      EXPECT_NEAR(got_sq, want_sq, 1e-3 * want_sq);
      // Deterministic: the same launch again gives the same bits.
      const MlpOutputs again = RunFused(in, features, true, &pending);
      EXPECT_EQ(std::memcmp(again.residual.data(), got.residual.data(), 4 * s.hidden), 0);
      EXPECT_EQ(again.normed, got.normed);
      EXPECT_EQ(again.sums, got.sums);

      // Left pending: the totals are the down products (act formed in another order than
      // GemvSiluMul's, so a few of its bf16 values an ulp apart: ~1e-4 of the products);
      // nothing else is written but the slot.
      const MlpOutputs left = RunFused(in, features, false, &pending);
      std::vector<float> totals(s.hidden);
      for (int j = 0; j < s.hidden; ++j) {
        totals[j] = static_cast<float>(static_cast<double>(pending[j]) / kernels::kPendingScale);
      }
      EXPECT_LE(RelL2(totals, products), 1e-3);
      EXPECT_EQ(std::memcmp(left.residual.data(), in.residual.data(), 4 * s.hidden), 0);
      for (const uint16_t v : left.normed) ASSERT_EQ(v, 0xffff);
      EXPECT_EQ(left.sums, (std::vector<unsigned long long>{in.fixed_in, 0, 0}));
      std::vector<long long> pending_again;
      RunFused(in, features, false, &pending_again);
      EXPECT_EQ(pending_again, pending);
    }
  }
}

// Pending products as a host row: fixed point, normal around 0 with deviation `scale`.
std::vector<long long> RandomPending(int n, double scale, std::mt19937_64& rng) {
  const std::vector<float> values = RandomNormal(n, 1.0f, rng);
  std::vector<long long> pending(n);
  for (int j = 0; j < n; ++j) pending[j] = std::llround(values[j] * scale * kernels::kPendingScale);
  return pending;
}

// What a GEMV adds to the residual for a pending product (gemv.cu PendingUpdate).
float PendingUpdate(long long pending) {
  const double value = static_cast<double>(pending) / kernels::kPendingScale;
  return FromBf16(ToBf16(static_cast<float>(value)));
}

TEST(FusedMlpTest, QkvProjectionRebuildsItsRowFromPendingProducts) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  // SmolLM2-135M's qkv projection (k = hidden = 576, 9 / 3 heads of 64).
  const int k = 576, heads = 9, kv_heads = 3, head_dim = 64, slots = 4;
  const int q_dim = heads * head_dim, kv_dim = kv_heads * head_dim, n = q_dim + 2 * kv_dim;
  const std::vector<float> residual = RandomNormal(k, 2.0f, rng);
  const std::vector<float> weight = RandomUniform(k, 0.5f, 1.5f, rng);
  const std::vector<long long> pending = RandomPending(k, 0.5, rng);
  DeviceArray<uint16_t> d_w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng)));
  // The row it should rebuild, and its sum of squares as a producer's slot would hold it.
  std::vector<float> x(k);
  double sum_sq = 0.0;
  for (int i = 0; i < k; ++i) {
    const float h = residual[i] + PendingUpdate(pending[i]);
    x[i] = h * weight[i];
    sum_sq += double{h} * h;
  }
  const unsigned long long fixed = std::llround(sum_sq * kernels::kNormSumScale);
  DeviceArray<uint16_t> d_x(ToBf16(x));
  DeviceArray<float> d_res(residual), d_weight(weight);
  DeviceArray<long long> d_pending(pending);
  DeviceArray<unsigned long long> d_sums(std::vector<unsigned long long>{fixed, 99});
  DeviceArray<float> d_freq(TinyRopeInvFreq(head_dim));
  DeviceArray<int32_t> d_pos(std::vector<int32_t>{321}), d_slot(std::vector<int32_t>{1});
  DeviceArray<uint16_t> want_y(n), want_k(slots * kv_dim), want_v(slots * kv_dim);
  DeviceArray<uint16_t> got_y(n), got_k(slots * kv_dim), got_v(slots * kv_dim);
  kernels::GemvParams p{d_x.bf16(), d_w.bf16(), want_y.get(), false, 1, n, k};
  p.link.scale_by = d_sums.get();
  p.link.eps = kEps;
  kernels::GemvRopeParams r{d_pos.get(),     d_freq.get(), d_slot.get(), want_k.bf16(),
                            want_v.bf16(),   heads,        kv_heads,     head_dim};
  ASSERT_EQ(kernels::GemvRopeKvStore(p, r, nullptr), cudaSuccess);
  // The same launch rebuilding x: the poisoned x (all NaN) and no scale_by must not be read.
  DeviceArray<uint16_t> poisoned(k);
  p.x = poisoned.bf16();
  p.y = got_y.get();
  p.link.scale_by = nullptr;
  p.link.zero_after = d_sums.get() + 1;
  p.link.rebuild = {d_res.get(), d_weight.get(), d_pending.get()};
  r.k_cache = got_k.bf16();
  r.v_cache = got_v.bf16();
  ASSERT_TRUE(kernels::GemvRopeKvStoreSupported(p, r));
  ASSERT_EQ(kernels::GemvRopeKvStore(p, r, nullptr), cudaSuccess);
  // 1 / rms from an fp32 sum instead of a fixed-point one: the bf16 outputs within an ulp.
  const std::vector<float> got = FromBf16(got_y.ToHost()), want = FromBf16(want_y.ToHost());
  EXPECT_LE(RelL2(got, want), 1e-3);
  const float floor = 1e-3f * MaxAbs(want);
  for (int j = 0; j < n; ++j) {
    ASSERT_LE(std::fabs(got[j] - want[j]), std::fabs(want[j]) / 64 + floor) << j;
  }
  // The new token's k and v in cache slot 1 (the other slots stay poisoned in both).
  const auto slot_row = [&](const DeviceArray<uint16_t>& cache) {
    const std::vector<float> all = FromBf16(cache.ToHost());
    return std::vector<float>(all.begin() + kv_dim, all.begin() + 2 * kv_dim);
  };
  EXPECT_LE(RelL2(slot_row(got_k), slot_row(want_k)), 1e-3);
  EXPECT_LE(RelL2(slot_row(got_v), slot_row(want_v)), 1e-3);
  EXPECT_EQ(d_sums.ToHost()[1], 0u);         // the slot before zeroed
  EXPECT_EQ(d_pending.ToHost(), pending);    // read only
  EXPECT_EQ(d_res.ToHost(), residual);
  // Refused: on the plain and SwiGLU epilogues, with scale_by too, or past the longest row.
  EXPECT_EQ(kernels::Gemv(p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::GemvSiluMul(p, nullptr), cudaErrorInvalidValue);
  kernels::GemvParams q = p;
  q.link.scale_by = d_sums.get();
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = p;
  q.k = kernels::kGemvMaxRebuildK + 8;
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = p;  // a producer side too: no epilogue both rebuilds and joins
  DeviceArray<unsigned long long> producer_sum(1);
  q.link.residual = d_res.get();
  q.link.weight = d_weight.get();
  q.link.normed = got_y.bf16();
  q.link.sum_sq = producer_sum.get();
  EXPECT_FALSE(kernels::GemvSupported(q));
}

TEST(FusedMlpTest, OProjectionJoinsPendingProductsFirst) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int n = 576, k = 576;  // SmolLM2-135M's o projection
  DeviceArray<uint16_t> d_x(ToBf16(RandomNormal(k, 1.0f, rng)));
  DeviceArray<uint16_t> d_w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng)));
  const std::vector<float> residual = RandomNormal(n, 2.0f, rng);
  const std::vector<float> weight = RandomUniform(n, 0.5f, 1.5f, rng);
  const std::vector<long long> pending = RandomPending(n, 0.5, rng);
  std::vector<float> joined(n);  // the residual with the pending products in it
  for (int j = 0; j < n; ++j) joined[j] = residual[j] + PendingUpdate(pending[j]);
  DeviceArray<float> want_res(joined), got_res(residual), d_weight(weight);
  DeviceArray<uint16_t> want_normed(n), got_normed(n), unused(n);
  DeviceArray<unsigned long long> want_sum(1), got_sum(1);
  GPU_CHECK(cudaMemset(want_sum.get(), 0, 8));
  GPU_CHECK(cudaMemset(got_sum.get(), 0, 8));
  DeviceArray<long long> d_pending(pending);
  kernels::GemvParams p{d_x.bf16(), d_w.bf16(), unused.get(), false, 1, n, k};
  p.link.residual = want_res.get();
  p.link.weight = d_weight.get();
  p.link.normed = want_normed.bf16();
  p.link.sum_sq = want_sum.get();
  ASSERT_EQ(kernels::Gemv(p, nullptr), cudaSuccess);
  p.link.residual = got_res.get();
  p.link.normed = got_normed.bf16();
  p.link.sum_sq = got_sum.get();
  p.link.pending = d_pending.get();
  ASSERT_TRUE(kernels::GemvSupported(p));
  ASSERT_EQ(kernels::Gemv(p, nullptr), cudaSuccess);
  const std::vector<float> got = got_res.ToHost(), want = want_res.ToHost();
  EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * n), 0);
  EXPECT_EQ(got_normed.ToHost(), want_normed.ToHost());
  EXPECT_EQ(got_sum.ToHost(), want_sum.ToHost());
  for (const long long v : d_pending.ToHost()) ASSERT_EQ(v, 0);  // zeroed for the next MLP
  // Pending products only with a producer: a consumer or an unlinked launch refuses them.
  kernels::GemvParams q{d_x.bf16(), d_w.bf16(), unused.get(), false, 1, n, k};
  q.link.pending = d_pending.get();
  EXPECT_FALSE(kernels::GemvSupported(q));
  q.link.scale_by = want_sum.get();  // a consumer
  EXPECT_FALSE(kernels::GemvSupported(q));
}

TEST(FusedMlpTest, RefusesWhatDoesNotFit) {
  const int hidden = 576, inter = 1536;
  DeviceArray<uint16_t> x(2048), wgu(size_t{2} * 2048 * inter), wd(size_t{2048} * inter);
  DeviceArray<uint16_t> normed(2048);
  DeviceArray<float> res(2048), weight(2048);
  DeviceArray<unsigned long long> sums(3);
  DeviceArray<long long> pending(2048);
  DeviceArray<unsigned int> arrivals(1);
  kernels::FusedMlpParams p;
  p.x = x.bf16();
  p.w_gate_up = wgu.bf16();
  p.w_down = wd.bf16();
  p.hidden = hidden;
  p.inter = inter;
  p.consumer.scale_by = sums.get();
  p.consumer.zero_after = sums.get() + 1;
  p.producer.residual = res.get();
  p.producer.weight = weight.get();
  p.producer.normed = normed.bf16();
  p.producer.sum_sq = sums.get() + 2;
  p.pending = pending.get();
  p.arrivals = arrivals.get();
  ASSERT_TRUE(kernels::FusedMlpSupported(p));
  kernels::FusedMlpParams left = p;  // its products left pending: no producer, no counter
  left.producer = {};
  left.arrivals = nullptr;
  EXPECT_TRUE(kernels::FusedMlpSupported(left));
  using Params = kernels::FusedMlpParams;
  const struct {
    const char* what;
    std::function<void(Params&)> change;
  } refusals[] = {
      {"hidden past the largest", [](Params& q) { q.hidden = 1032; }},
      {"hidden not a multiple of 8", [](Params& q) { q.hidden = 580; }},
      {"inter not a multiple of the block's features",
       [](Params& q) {
         q.inter = 1544;
         q.features = 16;
       }},
      {"features not 8 or 16", [](Params& q) { q.features = 32; }},
      {"x unaligned", [&](Params& q) { q.x = x.bf16() + 1; }},
      {"no pending products", [](Params& q) { q.pending = nullptr; }},
      {"a producer without a counter", [](Params& q) { q.arrivals = nullptr; }},
      {"the consumer zeroing the slot it reads",
       [&](Params& q) { q.consumer.zero_after = sums.get(); }},  // its scale_by
      {"no consumer link", [](Params& q) { q.consumer.scale_by = nullptr; }},
      {"an incomplete producer link", [](Params& q) { q.producer.normed = nullptr; }},
  };
  for (const auto& r : refusals) {
    SCOPED_TRACE(r.what);
    Params q = p;
    r.change(q);
    EXPECT_FALSE(kernels::FusedMlpSupported(q));
    EXPECT_EQ(kernels::FusedMlp(q, nullptr), cudaErrorInvalidValue);
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
