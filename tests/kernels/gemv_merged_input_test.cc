// The GEMV reading its input row merged from decode attention's key partitions (kernels/gemv.h
// GemvMergedInput; attention launched with merged_by_consumer): against attention merging its
// own partitions followed by the plain GEMV, on random caches, queries and weights, at several
// head shapes, context lengths and partition plans, under several launch shapes, with and
// without a norm producer link (and its pending products); the merged launch repeated bit for
// bit; what it refuses.

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/decode_attention.h"
#include "kernels/gemv.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/decode_launch.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct MergeCase {
  int heads, kv_heads, hd;
  int splits, granule;  // the attention's partition plan
  int n;                // the GEMV's output features
};

// SmolLM2-135M's o projection (9 heads of 64) at the partitions of 64 keys a context of 256
// gets; Llama-3.2-1B's (32 heads, k = 2048, the longest merged row); head_dim 128 at partitions
// of 32 keys (eight: two batches of the merge's four) and a ragged output width; five
// partitions (a batch of one after the first four).
const MergeCase kCases[] = {
    {9, 3, 64, 4, 64, 576},
    {32, 8, 64, 4, 64, 2048},
    {4, 2, 128, 8, 32, 1001},
    {9, 3, 64, 5, 64, 576},
};
constexpr int kBlockSize = 16;
// Context lengths: empty, one key, either side of a partition's end, several partitions (300:
// five of 64 keys where five are planned).
const int kContexts[] = {0, 1, 63, 64, 65, 130, 192, 256, 300};

// One sequence of `len` keys over a random cache, its random query and an o weight of mc.n rows
// on the device, with attention's partial buffers and merge counters.
struct MergeInputs {
  MergeInputs(const MergeCase& mc, int len, std::mt19937_64& rng)
      : ctx{len},
        cache(MakeCache(ctx, kBlockSize, mc.kv_heads, mc.hd, rng)),
        d_q(ToBf16(RandomNormal((mc.heads + 2 * mc.kv_heads) * mc.hd, 1.0f, rng))),
        d_k(cache.k),
        d_v(cache.v),
        d_tables(cache.tables),
        d_ctx(ctx),
        d_w(ToBf16(RandomNormal(size_t{1} * mc.n * mc.heads * mc.hd, 0.05f, rng))),
        parts(size_t{1} * mc.heads * mc.splits),
        d_po(parts * mc.hd),
        d_ml(parts * 2),
        d_counters(std::vector<int32_t>(mc.heads, 0)) {}

  // Attention over them with mc's plan, merging its own partitions (counters) into `out`.
  kernels::DecodeAttentionParams Attention(const MergeCase& mc,
                                           const DeviceArray<uint16_t>& out) const {
    kernels::DecodeAttentionParams p = DecodeParams(
        cache, 1, mc.heads, {mc.splits, mc.granule},
        {d_q, (mc.heads + 2 * mc.kv_heads) * mc.hd, d_k, d_v, d_tables, d_ctx, out, d_po, d_ml});
    p.counters = d_counters.get();
    return p;
  }
  // The GEMV's merged input over the partials.
  kernels::GemvMergedInput Merged(const MergeCase& mc) const {
    return {d_po.get(), d_ml.get(), d_ctx.get(), mc.splits, mc.granule, mc.heads, mc.hd};
  }

  std::vector<int32_t> ctx;
  Cache cache;
  DeviceArray<uint16_t> d_q, d_k, d_v;
  DeviceArray<int32_t> d_tables, d_ctx;
  DeviceArray<uint16_t> d_w;
  size_t parts;
  DeviceArray<float> d_po, d_ml;
  DeviceArray<int32_t> d_counters;
};

// Every launch shape the o projection may take (default first), one-warp tiles included.
const kernels::GemvTuning kTunings[] = {{}, {8, 4}, {8, 8}, {4, 2}, {2, 8}, {1, 2}};

TEST(GemvMergedInputTest, MatchesAttentionMergingItselfThenTheGemv) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (const MergeCase& mc : kCases) {
    for (const int len : kContexts) {
      SCOPED_TRACE(::testing::Message() << "heads " << mc.heads << " hd " << mc.hd << " splits "
                                        << mc.splits << " x " << mc.granule << " ctx " << len);
      const int k = mc.heads * mc.hd, n = mc.n;
      const MergeInputs in(mc, len, rng);
      const size_t parts = in.parts;
      for (const bool tensor_cores : {true, false}) {
        SCOPED_TRACE(tensor_cores ? "tensor cores where they apply" : "CUDA cores");
        // Attention merging its own partitions: the plain GEMV's input.
        DeviceArray<uint16_t> d_x(k);
        kernels::DecodeAttentionParams a = in.Attention(mc, d_x);
        a.tensor_cores = tensor_cores;
        GPU_CHECK(kernels::DecodeAttention(a, nullptr));
        // Partials only (`out` keeps its poison), launched right before each merged GEMV with
        // the partials poisoned first: a GEMV that read them before attention completed would
        // read NaNs.
        DeviceArray<uint16_t> d_untouched(k);
        a.out = d_untouched.bf16();
        a.counters = nullptr;
        a.merged_by_consumer = true;

        kernels::GemvParams plain{d_x.bf16(), in.d_w.bf16(), nullptr, true, 1, n, k};
        kernels::GemvParams merged = plain;
        merged.x = d_untouched.bf16();  // poison: must not be read
        merged.merged = in.Merged(mc);
        ASSERT_TRUE(kernels::GemvSupported(merged));
        for (const kernels::GemvTuning& tuning : kTunings) {
          SCOPED_TRACE(::testing::Message() << "warps " << tuning.warps << " unroll "
                                            << tuning.unroll);
          DeviceArray<float> d_want(n), d_got(n), d_again(n);
          plain.y = d_want.get();
          ASSERT_EQ(tuning.warps == 0 ? kernels::Gemv(plain, nullptr)
                                      : kernels::GemvTuned(plain, tuning, nullptr),
                    cudaSuccess);
          GPU_CHECK(cudaMemset(in.d_po.get(), 0xff, parts * mc.hd * sizeof(float)));
          GPU_CHECK(cudaMemset(in.d_ml.get(), 0xff, parts * 2 * sizeof(float)));
          GPU_CHECK(kernels::DecodeAttention(a, nullptr));
          merged.y = d_got.get();
          ASSERT_EQ(tuning.warps == 0 ? kernels::Gemv(merged, nullptr)
                                      : kernels::GemvTuned(merged, tuning, nullptr),
                    cudaSuccess);
          merged.y = d_again.get();
          ASSERT_EQ(tuning.warps == 0 ? kernels::Gemv(merged, nullptr)
                                      : kernels::GemvTuned(merged, tuning, nullptr),
                    cudaSuccess);
          const std::vector<float> want = d_want.ToHost(), got = d_got.ToHost();
          // The merged row may round an element to bf16 the other way than attention's own
          // merge (another order of the same sums, ~1e-7 apart): rare one-ulp steps of ~0.4 %
          // in single inputs, ~1e-4 of the output's norm each, hence 2e-3, not equality.
          if (len == 0) {
            EXPECT_EQ(got, std::vector<float>(n, 0.0f));
          } else {
            EXPECT_LE(RelL2(got, want), 2e-3);
          }
          EXPECT_EQ(d_again.ToHost(), got) << "launched again";
        }
        EXPECT_EQ(d_untouched.ToHost(), std::vector<uint16_t>(k, 0xffff)) << "out written";
      }
    }
  }
}

// As the o projection runs it at one row: a norm producer (it joins its products to the
// residual and writes the next norm's input), also after a fused MLP (its pending products joined
// first). The residual's updates against those of the plain input's launch.
TEST(GemvMergedInputTest, NormProducerJoinsTheMergedRowsProducts) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const MergeCase mc = kCases[0];
  const int k = mc.heads * mc.hd, n = mc.n;
  const MergeInputs in(mc, 192, rng);
  DeviceArray<uint16_t> d_x(k), d_unused(k);
  kernels::DecodeAttentionParams a = in.Attention(mc, d_x);
  GPU_CHECK(kernels::DecodeAttention(a, nullptr));
  a.out = d_unused.bf16();
  a.counters = nullptr;
  a.merged_by_consumer = true;
  GPU_CHECK(kernels::DecodeAttention(a, nullptr));

  const std::vector<float> residual = RandomNormal(n, 2.0f, rng);
  const std::vector<float> weight = RandomUniform(n, 0.5f, 1.5f, rng);
  DeviceArray<float> d_weight(weight);
  // Pending products as the fused MLP leaves them for the o projection (gemv.h GemvPendingRow):
  // random values in kPendingScale units.
  const std::vector<float> pending_values = RandomNormal(n, 0.5f, rng);
  std::vector<long long> pending(n);
  for (int j = 0; j < n; ++j) {
    pending[j] = std::llround(double{pending_values[j]} * kernels::kPendingScale);
  }
  // The residual's update by a producer launch of `tuning` from x (plain) or from the partials,
  // with or without pending products joined first (each launch zeroes them: a fresh copy).
  const auto updates = [&](const kernels::GemvTuning& tuning, bool merge, bool with_pending) {
    DeviceArray<float> d_res(residual);
    DeviceArray<long long> d_pending(pending);
    DeviceArray<uint16_t> d_normed(n), d_y(n);
    DeviceArray<unsigned long long> d_sum(std::vector<unsigned long long>(kernels::kNormSlotSize));
    kernels::GemvParams p{merge ? d_unused.bf16() : d_x.bf16(), in.d_w.bf16(), d_y.get(), false,
                          1, n, k};
    p.link.residual = d_res.get();
    p.link.weight = d_weight.get();
    p.link.normed = d_normed.bf16();
    p.link.sum_sq = d_sum.get();
    if (with_pending) p.link.pending = d_pending.get();
    if (merge) p.merged = in.Merged(mc);
    EXPECT_TRUE(kernels::GemvSupported(p));
    GPU_CHECK(tuning.warps == 0 ? kernels::Gemv(p, nullptr)
                                : kernels::GemvTuned(p, tuning, nullptr));
    const std::vector<float> after = d_res.ToHost();
    // The next norm's input and sum from the residual the launch left: normed = bf16(h * weight)
    // bit for bit, the squares' sum (fixed point) within 1e-5 of the host's, relative.
    const std::vector<uint16_t> normed = d_normed.ToHost();
    double want_sq = 0.0;
    for (int j = 0; j < n; ++j) {
      EXPECT_EQ(normed[j], ToBf16(after[j] * weight[j])) << "feature " << j;
      want_sq += double{after[j]} * after[j];
    }
    EXPECT_NEAR(static_cast<double>(d_sum.ToHost()[0]) / kernels::kNormSumScale, want_sq,
                1e-5 * want_sq)
        << (merge ? "merged" : "plain") << ": the squares' sum";
    if (with_pending) {
      EXPECT_EQ(d_pending.ToHost(), std::vector<long long>(n, 0)) << "pending products not zeroed";
    }
    std::vector<float> delta(n);
    for (int j = 0; j < n; ++j) delta[j] = after[j] - residual[j];
    return delta;
  };
  for (const kernels::GemvTuning& tuning : kTunings) {
    SCOPED_TRACE(::testing::Message() << "warps " << tuning.warps << " unroll " << tuning.unroll);
    // The updates are the products rounded to bf16 (plus the pending products, the same on
    // both sides): within the tolerance of the test above.
    for (const bool with_pending : {false, true}) {
      SCOPED_TRACE(with_pending ? "with pending products" : "no pending products");
      EXPECT_LE(RelL2(updates(tuning, true, with_pending), updates(tuning, false, with_pending)),
                2e-3);
    }
  }
}

TEST(GemvMergedInputTest, RefusesWhatItCannotMerge) {
  DeviceArray<uint16_t> d_x(4096 * 2), d_w(size_t{576} * 4096);
  DeviceArray<float> d_y(576 * 2), d_po(4096 * 4), d_ml(64 * 4 * 2);
  DeviceArray<int32_t> d_ctx(std::vector<int32_t>{100});
  kernels::GemvParams ok{d_x.bf16(), d_w.bf16(), d_y.get(), true, 1, 576, 576};
  ok.merged = {d_po.get(), d_ml.get(), d_ctx.get(), 4, 64, 9, 64};
  ASSERT_TRUE(kernels::GemvSupported(ok));
  kernels::GemvParams p = ok;
  p.m = 2;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "two rows";
  p = ok;
  p.k = 640;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "k other than num_heads * head_dim";
  p = ok;
  p.merged.partial_ml = nullptr;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "no maxima and sums";
  p = ok;
  p.merged.context_lens = nullptr;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "no context length";
  p = ok;
  p.merged.head_dim = 60;
  p.merged.num_heads = 576 / 60 + 1;
  p.k = p.merged.head_dim * p.merged.num_heads;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "head_dim not a multiple of 8";
  p = ok;
  p.k = 4096;
  p.merged.num_heads = 64;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "a row longer than kGemvMaxRebuildK";
  p = ok;
  p.merged.partition_size = 0;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "partitions without a granule";
  p = ok;
  p.merged.num_splits = 1;
  EXPECT_FALSE(kernels::GemvSupported(p)) << "one partition: attention leaves no partials";
  EXPECT_EQ(kernels::GemvTuned(ok, {0, 0, -1, true}, nullptr), cudaErrorInvalidValue)
      << "the row-streaming kernel";
  p = ok;
  p.y_f32 = false;
  EXPECT_EQ(kernels::GemvSiluMul(p, nullptr), cudaErrorInvalidValue) << "the SwiGLU epilogue";
  // Attention refuses to leave its partials and merge them itself.
  std::mt19937_64 rng(1);
  const MergeInputs in(kCases[0], 100, rng);
  DeviceArray<uint16_t> d_out(576);
  kernels::DecodeAttentionParams a = in.Attention(kCases[0], d_out);
  a.merged_by_consumer = true;
  EXPECT_EQ(kernels::DecodeAttention(a, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace rtgen::testing_gpu
