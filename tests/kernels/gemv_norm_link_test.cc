// A norm linked between two GEMVs at one row, on the row-streaming and the tensor-core kernel,
// and over several rows on the tensor-core kernel (kernels/gemv.h GemvNormLink). The producer's
// residual, normed rows and fixed-point sums of squares against the host's arithmetic on the
// products the plain GEMV stores (residual and normed rows bit for bit); the consumer's sums
// scaled by 1 / rms of each row's sum against the plain GEMV's (fp32 out) and the slot it names
// zeroed; a link that only zeroes a slot storing the plain products; the consumer's SwiGLU and
// RoPE variants bit for bit the plain consumer followed by SiluMul / RopeKvStore; links refused
// where the kernel cannot take them.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv.h"
#include "kernels/rope.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

constexpr float kEps = 1e-5f;

// A k past the rows threshold, not a whole lane group (1024 elements) at n = 4096.
int RowsK(int n) { return SmallestRowsK(n) + 8; }

// A launch the link is checked on: a weight shape and a tuning (rows: the row-streaming kernel,
// with slab the slab kernel; otherwise the tensor-core kernel's warps and unroll, {0, 0}: its
// default).
struct LinkCase {
  const char* name;
  int n = 0;
  int k = 0;
  kernels::GemvTuning tuning{};
};

// The row-streaming kernel past its threshold, the slab kernel at Llama-3-8B's k, and the
// tensor-core one at SmolLM2-135M's o / down shapes and at a ragged shape (a last tile of one
// feature, a partial last group of k) under every warp count, the one-warp tile that stores from
// registers included.
std::vector<LinkCase> LinkCases(int rows_n) {
  const int ragged_n = 1001, ragged_k = 520;
  std::vector<LinkCase> cases = {
      {"rows", rows_n, RowsK(rows_n), {0, 0, -1, true}},
      {"slab", rows_n, 4096, {0, 0, -1, true, true}},
      {"tensor cores, o shape", 576, 576, {}},
      {"tensor cores, down shape", 576, 1536, {}},
  };
  for (const int warps : {1, 2, 4, 8}) {
    cases.push_back({"tensor cores, ragged", ragged_n, ragged_k, {warps, 2, -1, false}});
  }
  return cases;
}

cudaError_t RunCase(const LinkCase& c, const kernels::GemvParams& p) {
  if (c.tuning.slab) return kernels::GemvTuned(p, c.tuning, nullptr);
  if (c.tuning.rows || c.tuning.warps == 0) {
    // The default tuning must be the kernel the case means to cover.
    EXPECT_EQ(kernels::GemvDefaultTuning(p).rows, c.tuning.rows) << c.name;
    return kernels::Gemv(p, nullptr);
  }
  return kernels::GemvTuned(p, c.tuning, nullptr);
}

constexpr int kSlot = kernels::kNormSlotSize, kStride = kernels::kNormSumRowStride;
constexpr unsigned long long kUntouched = 7;

// Random bf16 operands of an m-row launch: x [m, k] ~ N(0, 1), w [n, k] ~ N(0, 0.05).
struct Operands {
  Operands(int m, int n, int k, std::mt19937_64& rng)
      : x(ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng))),
        w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng))) {}
  DeviceArray<uint16_t> x, w;
};

// A slot (kUntouched in every entry before) after a consumer of m rows zeroed it: rows 0 .. m - 1
// zero, every other entry untouched.
void ExpectZeroedRows(const unsigned long long* slot, int m) {
  for (int i = 0; i < kSlot; ++i) {
    const bool zeroed = i % kStride == 0 && i / kStride < m;
    EXPECT_EQ(slot[i], zeroed ? 0u : kUntouched) << i;
  }
}

// A producer of m rows: each row joined to its own residual row (bit for bit the host's
// arithmetic on the products the plain launch stores) and its sum of squares added to its own
// entry of the slot (within 1e-5); the slot's other entries, y and the normed rows' guard cells
// untouched.
void ExpectProducerJoins(const LinkCase& c, int m, std::mt19937_64& rng) {
  SCOPED_TRACE(c.name);
  SCOPED_TRACE(m);
  const int n = c.n, k = c.k;
  const Operands ops(m, n, k, rng);
  const std::vector<float> residual = RandomNormal(size_t{1} * m * n, 2.0f, rng);
  const std::vector<float> weight = RandomUniform(n, 0.5f, 1.5f, rng);
  DeviceArray<float> d_res(residual), d_weight(weight);
  DeviceArray<uint16_t> d_plain(size_t{1} * m * n), d_normed(size_t{1} * m * n + 8),
      d_y(size_t{1} * m * n);
  std::vector<unsigned long long> zeros(kSlot, kUntouched);
  for (int r = 0; r < m; ++r) zeros[r * kStride] = 0;
  DeviceArray<unsigned long long> d_sum(zeros);
  kernels::GemvParams p{ops.x.bf16(), ops.w.bf16(), d_plain.get(), false, m, n, k};
  ASSERT_EQ(RunCase(c, p), cudaSuccess);  // the products as the same launch stores them
  p.y = d_y.get();
  p.link.residual = d_res.get();
  p.link.weight = d_weight.get();
  p.link.normed = d_normed.bf16();
  p.link.sum_sq = d_sum.get();
  ASSERT_TRUE(kernels::GemvSupported(p));
  ASSERT_EQ(RunCase(c, p), cudaSuccess);
  const std::vector<float> y = FromBf16(d_plain.ToHost()), res = d_res.ToHost();
  const std::vector<uint16_t> normed = d_normed.ToHost();
  const std::vector<unsigned long long> sum = d_sum.ToHost();
  for (int r = 0; r < m; ++r) {
    double want_sq = 0.0;
    for (int j = 0; j < n; ++j) {
      const size_t i = size_t{1} * r * n + j;
      const float h = residual[i] + y[i];
      ASSERT_EQ(std::memcmp(&res[i], &h, 4), 0) << r << " " << j;
      ASSERT_EQ(normed[i], ToBf16(h * weight[j])) << r << " " << j;
      want_sq += double{h} * h;
    }
    EXPECT_NEAR(static_cast<double>(sum[r * kStride]) / kernels::kNormSumScale, want_sq,
                1e-5 * want_sq)
        << r;
  }
  for (int i = 0; i < kSlot; ++i) {  // only the m rows' sums are added to
    if (i % kStride != 0 || i / kStride >= m) {
      EXPECT_EQ(sum[i], kUntouched) << i;
    }
  }
  for (size_t i = size_t{1} * m * n; i < normed.size(); ++i) ASSERT_EQ(normed[i], 0xffff) << i;
  // y itself is not written by a producer.
  for (const uint16_t v : d_y.ToHost()) ASSERT_EQ(v, 0xffff);
}

// A consumer of m rows (row r's mean square 1 + r): each row's sums (fp32 out) the plain
// launch's times its own 1 / rms; the slot read, not changed; the slot before zeroed in its m
// rows' entries only.
void ExpectConsumerScales(const LinkCase& c, int m, std::mt19937_64& rng) {
  SCOPED_TRACE(c.name);
  SCOPED_TRACE(m);
  const int n = c.n, k = c.k;
  const Operands ops(m, n, k, rng);
  std::vector<unsigned long long> sums(2 * kSlot, kUntouched);
  for (int r = 0; r < m; ++r) {
    sums[r * kStride] = std::llround((1.0 + r) * k * kernels::kNormSumScale);
  }
  DeviceArray<unsigned long long> d_sums(sums);
  DeviceArray<float> d_plain(size_t{1} * m * n), d_scaled(size_t{1} * m * n);
  kernels::GemvParams p{ops.x.bf16(), ops.w.bf16(), d_plain.get(), true, m, n, k};
  ASSERT_EQ(RunCase(c, p), cudaSuccess);
  p.y = d_scaled.get();
  p.link.scale_by = d_sums.get();
  p.link.zero_after = d_sums.get() + kSlot;
  p.link.eps = kEps;
  ASSERT_EQ(RunCase(c, p), cudaSuccess);
  const std::vector<float> plain = d_plain.ToHost(), scaled = d_scaled.ToHost();
  std::vector<double> want(plain.size());
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = plain[i] / std::sqrt(1.0 + static_cast<double>(i / n) + kEps);
  }
  EXPECT_LE(RelL2(scaled, want), 1e-6);
  const std::vector<unsigned long long> after = d_sums.ToHost();
  for (int i = 0; i < kSlot; ++i) EXPECT_EQ(after[i], sums[i]) << i;  // read, not changed
  ExpectZeroedRows(after.data() + kSlot, m);
}

// A link of zero_after alone (the last projection before a launched norm): the products (bf16
// out) bit for bit the plain launch's, and the slot zeroed in its m rows' entries only.
void ExpectZeroingOnly(const LinkCase& c, int m, std::mt19937_64& rng) {
  SCOPED_TRACE(c.name);
  SCOPED_TRACE(m);
  const int n = c.n, k = c.k;
  const Operands ops(m, n, k, rng);
  DeviceArray<unsigned long long> d_sums(std::vector<unsigned long long>(kSlot, kUntouched));
  DeviceArray<uint16_t> d_plain(size_t{1} * m * n), d_linked(size_t{1} * m * n);
  kernels::GemvParams p{ops.x.bf16(), ops.w.bf16(), d_plain.get(), false, m, n, k};
  ASSERT_EQ(RunCase(c, p), cudaSuccess);
  p.y = d_linked.get();
  p.link.zero_after = d_sums.get();
  p.link.zero_only = true;
  ASSERT_TRUE(kernels::GemvSupported(p));
  ASSERT_EQ(RunCase(c, p), cudaSuccess);
  EXPECT_EQ(d_linked.ToHost(), d_plain.ToHost());
  ExpectZeroedRows(d_sums.ToHost().data(), m);
}

TEST(GemvNormLinkTest, ZeroingOnlyLinkStoresThePlainProducts) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (const LinkCase& c : LinkCases(4096)) {
    ExpectZeroingOnly(c, 1, rng);
    if (c.tuning.rows) continue;  // one row only
    for (const int m : {5, 8, kernels::kGemvMaxLinkRows}) ExpectZeroingOnly(c, m, rng);
  }
}

TEST(GemvNormLinkTest, ProducerJoinsTheResidualAndSumsSquares) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  // odd rows n: a last unit with one row
  for (const LinkCase& c : LinkCases(4097)) ExpectProducerJoins(c, 1, rng);
}

TEST(GemvNormLinkTest, ConsumerScalesByTheSumAndZeroesThePreviousSlot) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (const LinkCase& c : LinkCases(4096)) ExpectConsumerScales(c, 1, rng);
}

// A consumer's SwiGLU and RoPE variants: bit for bit the plain consumer (bf16 out) followed by
// SiluMul / RopeKvStore, as without a link; on the row-streaming kernel and the slab kernel
// (Llama-3-8B's heads) and on the tensor-core one (SmolLM2-135M's shapes).
struct VariantCase {
  bool rows = false;
  bool slab = false;  // with rows: the slab kernel, by its tuning (opt-in by default)
  int swiglu_n = 0, swiglu_k = 0;
  int heads = 0, kv_heads = 0, head_dim = 0, qkv_k = 0;
  int m = 1;  // input rows (each with its own sum)
};

void ExpectConsumerVariantsMatch(const VariantCase& vc, std::mt19937_64& rng) {
  SCOPED_TRACE(vc.slab ? "slab" : vc.rows ? "rows" : "tensor cores");
  // The default tuning's kernel is the one the case covers, unless the case asks for the slab
  // kernel: then its tuning is given.
  const auto expect_kernel = [&vc](const kernels::GemvParams& p) {
    const kernels::GemvTuning t = kernels::GemvDefaultTuning(p);
    EXPECT_EQ(t.rows, vc.rows);
    if (std::getenv("RTGEN_GEMV_SLAB") == nullptr) {
      EXPECT_FALSE(t.slab);
    }
  };
  kernels::GemvTuning slab;
  slab.rows = slab.slab = true;
  SCOPED_TRACE(vc.m);
  const int m = vc.m;
  std::vector<unsigned long long> sums(2 * kernels::kNormSlotSize);
  for (int r = 0; r < m; ++r) {
    sums[r * kernels::kNormSumRowStride] =
        std::llround((2.5 + 0.75 * r) * 4096 * kernels::kNormSumScale);
  }
  DeviceArray<unsigned long long> d_sums(sums);
  kernels::GemvNormLink consumer;
  consumer.scale_by = d_sums.get();
  consumer.zero_after = d_sums.get() + kernels::kNormSlotSize;
  consumer.eps = kEps;
  {  // SwiGLU: [gate; up]
    const int n = vc.swiglu_n, k = vc.swiglu_k, inter = n / 2;
    const Operands ops(m, n, k, rng);
    DeviceArray<uint16_t> d_plain(size_t{1} * m * n), d_act(size_t{1} * m * inter),
        d_fused(size_t{1} * m * inter);
    kernels::GemvParams p{ops.x.bf16(), ops.w.bf16(), d_plain.get(), false, m, n, k, consumer};
    expect_kernel(p);
    ASSERT_EQ(vc.slab ? kernels::GemvTuned(p, slab, nullptr) : kernels::Gemv(p, nullptr),
              cudaSuccess);
    ASSERT_EQ(kernels::SiluMul({d_plain.bf16(), d_act.bf16(), m, inter}, nullptr), cudaSuccess);
    p.y = d_fused.get();
    ASSERT_EQ(vc.slab ? kernels::GemvSiluMulTuned(p, slab, nullptr)
                      : kernels::GemvSiluMul(p, nullptr),
              cudaSuccess);
    EXPECT_EQ(d_fused.ToHost(), d_act.ToHost());
  }
  {  // RoPE and the KV store
    const int heads = vc.heads, kv_heads = vc.kv_heads, head_dim = vc.head_dim;
    const int q_dim = heads * head_dim, kv_dim = kv_heads * head_dim, n = q_dim + 2 * kv_dim;
    const int k = vc.qkv_k, slots = m + 3;
    const Operands ops(m, n, k, rng);
    DeviceArray<float> d_freq(TinyRopeInvFreq(head_dim));
    std::vector<int32_t> pos(m), slot(m);
    for (int r = 0; r < m; ++r) pos[r] = 1234 + 97 * r, slot[r] = slots - 1 - r;
    DeviceArray<int32_t> d_pos(pos), d_slot(slot);
    DeviceArray<uint16_t> plain_y(size_t{1} * m * n), plain_k(slots * kv_dim),
        plain_v(slots * kv_dim);
    DeviceArray<uint16_t> fused_y(size_t{1} * m * n), fused_k(slots * kv_dim),
        fused_v(slots * kv_dim);
    kernels::GemvParams p{ops.x.bf16(), ops.w.bf16(), plain_y.get(), false, m, n, k, consumer};
    expect_kernel(p);
    ASSERT_EQ(vc.slab ? kernels::GemvTuned(p, slab, nullptr) : kernels::Gemv(p, nullptr),
              cudaSuccess);
    const kernels::RopeParams rope{plain_y.bf16(), plain_y.bf16() + q_dim, n, d_pos.get(),
                                   d_freq.get(), m, heads, kv_heads, head_dim};
    const kernels::KvStoreParams store{plain_y.bf16() + q_dim, plain_y.bf16() + q_dim + kv_dim, n,
                                       plain_k.bf16(), plain_v.bf16(), d_slot.get(), m, kv_dim};
    ASSERT_EQ(kernels::RopeKvStore(rope, store, nullptr), cudaSuccess);
    p.y = fused_y.get();
    const kernels::GemvRopeParams r{d_pos.get(),    d_freq.get(), d_slot.get(), fused_k.bf16(),
                                    fused_v.bf16(), heads,        kv_heads,     head_dim};
    ASSERT_EQ(vc.slab ? kernels::GemvRopeKvStoreTuned(p, r, slab, nullptr)
                      : kernels::GemvRopeKvStore(p, r, nullptr),
              cudaSuccess);
    EXPECT_EQ(fused_y.ToHost(), plain_y.ToHost());
    EXPECT_EQ(fused_k.ToHost(), plain_k.ToHost());
    EXPECT_EQ(fused_v.ToHost(), plain_v.ToHost());
  }
}

TEST(GemvNormLinkTest, ConsumerVariantsMatchPlainConsumerThenElementwise) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int llama8b_qkv = (32 + 2 * 8) * 128;
  ExpectConsumerVariantsMatch({true, false, 4096, RowsK(4096), 32, 8, 128, RowsK(llama8b_qkv)},
                              rng);
  ExpectConsumerVariantsMatch({true, true, 8192, 4096, 32, 8, 128, 4096}, rng);
  ExpectConsumerVariantsMatch({false, false, 2 * 1536, 576, 9, 3, 64, 576}, rng);
  // Several rows, each scaled by its own sum (the tensor-core kernel): SmolLM2-135M's shapes and
  // Llama-3.2-1B's.
  for (const int m : {2, 4, 8, kernels::kGemvMaxLinkRows}) {
    ExpectConsumerVariantsMatch({false, false, 2 * 1536, 576, 9, 3, 64, 576, m}, rng);
    ExpectConsumerVariantsMatch({false, false, 2 * 8192, 2048, 32, 8, 64, 2048, m}, rng);
  }
}

// The link over several input rows (m = 2 .. kGemvMaxLinkRows, the tensor-core kernel at the
// shapes above; past 8 rows the kernels with the mma's upper half): each row its own residual
// row, its own sum and its own scale.
TEST(GemvNormLinkTest, SeveralRowsEachTheirOwnSum) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (const int m : {2, 3, 8, 12, kernels::kGemvMaxLinkRows}) {
    for (const LinkCase& c : LinkCases(4096)) {
      if (c.tuning.rows) continue;  // one row only
      ExpectProducerJoins(c, m, rng);
      ExpectConsumerScales(c, m, rng);
    }
  }
}

TEST(GemvNormLinkTest, RefusesLinksTheKernelCannotTake) {
  const int n = 4096, k = RowsK(n);
  DeviceArray<uint16_t> w(size_t{1} * n * k), x(k), y(n), act(n / 2);
  DeviceArray<float> res(n), weight(n);
  DeviceArray<unsigned long long> sums(2);
  kernels::GemvParams p{x.bf16(), w.bf16(), y.get(), false, 1, n, k};
  p.link.residual = res.get();
  p.link.weight = weight.get();
  p.link.normed = y.bf16();
  p.link.sum_sq = sums.get();
  EXPECT_TRUE(kernels::GemvSupported(p));
  kernels::GemvParams q = p;
  q.link.weight = nullptr;  // a producer needs all four
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = p;
  q.m = kernels::kGemvMaxLinkRows + 1;  // past the rows a link takes
  EXPECT_FALSE(kernels::GemvSupported(q));
  EXPECT_EQ(kernels::Gemv(q, nullptr), cudaErrorInvalidValue);
  const kernels::GemvTuning tensor_cores{2, 4};
  EXPECT_EQ(kernels::GemvTuned(q, tensor_cores, nullptr), cudaErrorInvalidValue);
  q.m = 2;  // several rows: the tensor-core kernel, not the row-streaming one
  EXPECT_TRUE(kernels::GemvSupported(q));
  EXPECT_EQ(kernels::GemvTuned(q, {0, 0, -1, true}, nullptr), cudaErrorInvalidValue);
  q.link.pending = reinterpret_cast<long long*>(sums.get());  // pending products: one row
  EXPECT_FALSE(kernels::GemvSupported(q));
  // A complete producer link, but through an epilogue other than the plain one.
  q = p;
  q.y = act.get();
  EXPECT_EQ(kernels::GemvSiluMul(q, nullptr), cudaErrorInvalidValue);
  // A consumer's zero_after: never a slot the launch reads or adds to; alone only with
  // zero_only (a consumer missing its scale_by is refused), and then at most kGemvMaxLinkRows
  // rows, as every link.
  q = p;
  q.link.zero_only = true;
  q.link.zero_after = sums.get() + 1;
  EXPECT_TRUE(kernels::GemvSupported(q));
  q.link.zero_after = q.link.sum_sq;
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = {x.bf16(), w.bf16(), y.get(), false, 1, n, k};
  q.link.zero_after = sums.get() + 1;
  EXPECT_FALSE(kernels::GemvSupported(q));
  q.link.zero_only = true;
  EXPECT_TRUE(kernels::GemvSupported(q));
  q.m = kernels::kGemvMaxLinkRows + 1;
  EXPECT_FALSE(kernels::GemvSupported(q));
  q.m = 1;
  q.link.scale_by = sums.get();  // zero_only with sums to scale by
  EXPECT_FALSE(kernels::GemvSupported(q));
  q.link.zero_only = false;
  EXPECT_TRUE(kernels::GemvSupported(q));
  q.link.zero_after = sums.get();
  EXPECT_FALSE(kernels::GemvSupported(q));
  q = {x.bf16(), w.bf16(), y.get(), false, 1, n, k};
  q.link.zero_only = true;  // with nothing to zero
  EXPECT_FALSE(kernels::GemvSupported(q));
}

}  // namespace
}  // namespace rtgen::testing_gpu
