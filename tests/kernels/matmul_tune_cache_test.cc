// The tune cache (kernels/matmul_tune_cache.h) on the GPU: a context created later (a restarted
// server) runs the cached choice without tuning; the shipped table's choice runs on its GPU. The
// file itself: tests/kernels_host.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/env_switch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_tune_cache.h"
#include "kernels/random_fill.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/unique_temp_path.h"

namespace rtgen::testing_gpu {
namespace {

using kernels::MatmulTuneCache;

// Random bf16 operands of an m x n x k product (y = x w^T), on the host and the device.
struct Operands {
  Operands(int m_, int n_, int k_, std::mt19937_64& rng)
      : m(m_), n(n_), k(k_), x(ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng))),
        w(ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng))), d_x(x), d_w(w) {}
  // Runs the product on ctx; its plan's info must begin with `source` (any where empty) and its
  // result meet the fp64 reference. Returns the result (bf16 bits).
  std::vector<uint16_t> Run(kernels::MatmulContext& ctx, const std::string& source) const {
    DeviceArray<uint16_t> y(size_t{1} * m * n);
    const absl::Status st =
        kernels::Matmul(ctx, {d_x.bf16(), d_w.bf16(), y.bf16(), false, m, n, k}, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    const std::string info = ctx.PlanInfo(m, n, k, false);
    EXPECT_EQ(info.rfind(source, 0), 0u) << info;
    const std::vector<uint16_t> out = y.ToHost();
    EXPECT_LE(RelL2(FromBf16(out), MatmulReference(x, w, m, n, k)), 1e-2);
    return out;
  }
  int m, n, k;
  std::vector<uint16_t> x, w;
  DeviceArray<uint16_t> d_x, d_w;
};

// A tuning context that reads, and adds its choices to, the cache file at `path` (its own: a
// process RTGEN_MATMUL_TUNE_CACHE would otherwise be read first; a missing file is an empty
// cache). Null, with the failure recorded, where the context or the file cannot be had.
std::unique_ptr<kernels::MatmulContext> ContextWithCache(const std::string& path) {
  auto ctx = kernels::MatmulContext::Create(false, true);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  auto cache = MatmulTuneCache::Load(path);
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (!ctx.ok() || !cache.ok()) return nullptr;
  (*ctx)->UseTuneCache(std::make_shared<MatmulTuneCache>(*std::move(cache)));
  return *std::move(ctx);
}

// One process tunes a decode shape with the cache attached (the choice is written); a context
// with the file loaded afresh (as after a restart) runs that choice without tuning, bitwise equal.
TEST(MatmulTuneCacheTest, RestartedContextRunsTheCachedChoice) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int m = 40, n = 1024, k = 768;  // a shape no other test tunes
  const Operands ops(m, n, k, rng);
  const testing::ScopedTempPath tmp("tune.tsv", {".lock"});
  const auto first = ContextWithCache(tmp.path());
  ASSERT_NE(first, nullptr);
  first->AllowTuning(true);
  const std::vector<uint16_t> want = ops.Run(*first, "");
  const std::string first_info = first->PlanInfo(m, n, k, false);

  auto loaded = MatmulTuneCache::Load(tmp.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto entry = loaded->Find(first->device_tag(), kernels::MatmulTuneModeName(),
                                  {m, n, k, false, false});
  ASSERT_TRUE(entry) << "the tuned choice was not written to " << tmp.path();
  EXPECT_EQ(entry->note, first_info);
  const auto restarted = ContextWithCache(tmp.path());
  ASSERT_NE(restarted, nullptr);
  // Tuning is not allowed here. The plan's info is what shows the cache was read: the
  // process-wide choice of the first context would give the same bits without it.
  const std::vector<uint16_t> got = ops.Run(*restarted, "from the tune cache");
  EXPECT_EQ(got, want) << "the cached choice gave other bits";
}

// On a GPU the shipped tables name (kernels/tuned_matmul), a tuning context with no cache file
// runs the shipped choice for such a shape, without tuning, and its result meets the reference;
// elsewhere the test says it has nothing to run.
TEST(MatmulTuneCacheTest, ShippedChoiceRunsOnTheGpuItWasTunedOn) {
  if (kernels::EnvIs("RTGEN_MATMUL_SHIPPED", "0")) GTEST_SKIP() << "RTGEN_MATMUL_SHIPPED=0";
  auto ctx = kernels::MatmulContext::Create(false, true);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  // The cheapest shipped shape of this GPU with a bf16 output, not accumulating.
  MatmulTuneCache::Shape pick{};
  MatmulTuneCache::Shipped().ForEach([&](const std::string& tag, const std::string&,
                                         const MatmulTuneCache::Shape& s,
                                         const MatmulTuneCache::Entry&) {
    if (tag != (*ctx)->device_tag() || s.y_f32 || s.accumulate) return;
    if (pick.m == 0 || int64_t{s.n} * s.k < int64_t{pick.n} * pick.k) pick = s;
  });
  if (pick.m == 0) GTEST_SKIP() << "no shipped choice for " << (*ctx)->device_tag();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(::testing::Message() << pick.m << "x" << pick.n << "x" << pick.k);
  Operands(pick.m, pick.n, pick.k, rng).Run(**ctx, "from the shipped table");
}

// Every shipped entry of this GPU's tag (kernels/tuned_matmul) is accepted by cuBLASLt and runs
// from the shipped table (a rejected entry falls back to tuning or the heuristic without an
// error: matmul.h), on device-drawn operands, a sample of its output finite, and none is written
// to the context's tune-cache file. On a GPU no table names, the test says it has nothing to run.
TEST(MatmulTuneCacheTest, EveryShippedChoiceOfThisGpuRunsFromTheTable) {
  if (kernels::EnvIs("RTGEN_MATMUL_SHIPPED", "0")) GTEST_SKIP() << "RTGEN_MATMUL_SHIPPED=0";
  if (kernels::EnvIs("RTGEN_MATMUL_TUNE", "0")) GTEST_SKIP() << "RTGEN_MATMUL_TUNE=0";
  const testing::ScopedTempPath own_cache("own.tsv", {".lock"});
  const auto ctx = ContextWithCache(own_cache.path());  // empty
  ASSERT_NE(ctx, nullptr);
  std::vector<MatmulTuneCache::Shape> shapes;
  size_t x_elems = 0, w_elems = 0, y_elems = 0;
  MatmulTuneCache::Shipped().ForEach([&](const std::string& tag, const std::string&,
                                         const MatmulTuneCache::Shape& s,
                                         const MatmulTuneCache::Entry&) {
    if (tag != ctx->device_tag()) return;
    shapes.push_back(s);
    x_elems = std::max(x_elems, size_t{1} * s.m * s.k);
    w_elems = std::max(w_elems, size_t{1} * s.n * s.k);
    y_elems = std::max(y_elems, size_t{1} * s.m * s.n);
  });
  if (shapes.empty()) GTEST_SKIP() << "no shipped choice for " << ctx->device_tag();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  DeviceArray<uint16_t> x(x_elems), w(w_elems);
  DeviceArray<float> y(y_elems);  // fp32 outputs use all of it, bf16 ones half
  ASSERT_EQ(kernels::RandomFillBf16(x.bf16(), static_cast<int64_t>(x_elems), {seed, 1, 0.0f, 1.0f},
                                    nullptr),
            cudaSuccess);
  ASSERT_EQ(kernels::RandomFillBf16(w.bf16(), static_cast<int64_t>(w_elems),
                                    {seed, 2, 0.0f, 0.05f}, nullptr),
            cudaSuccess);
  for (const MatmulTuneCache::Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " f32 " << s.y_f32
                                      << " accumulate " << s.accumulate);
    ASSERT_EQ(cudaMemset(y.get(), 0, y_elems * sizeof(float)), cudaSuccess);  // β = 1 reads it
    kernels::MatmulParams p;
    p.x = x.bf16();
    p.w = w.bf16();
    p.y = y.get();
    p.y_f32 = s.y_f32;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.accumulate = s.accumulate;
    const absl::Status st = kernels::Matmul(*ctx, p, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    const std::string info = ctx->PlanInfo(s.m, s.n, s.k, s.y_f32, s.accumulate);
    EXPECT_EQ(info.rfind("from the shipped table", 0), 0u) << info;
    // The first outputs (up to 1024), finite.
    const size_t sample = std::min<size_t>(1024, size_t{1} * s.m * s.n);
    std::vector<float> f32(s.y_f32 ? sample : 0);
    std::vector<uint16_t> bf16(s.y_f32 ? 0 : sample);
    ASSERT_EQ(s.y_f32 ? cudaMemcpy(f32.data(), y.get(), sample * 4, cudaMemcpyDeviceToHost)
                      : cudaMemcpy(bf16.data(), y.get(), sample * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t i = 0; i < sample; ++i) {
      ASSERT_TRUE(std::isfinite(s.y_f32 ? f32[i] : FromBf16(bf16[i]))) << "output " << i;
    }
  }
  // The shipped choices stay the table's: written to the file, they were taken first on the
  // next run, RTGEN_MATMUL_SHIPPED=0 or not.
  const auto written = MatmulTuneCache::Load(own_cache.path());
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->size(), 0u) << "shipped choices were written to the tune cache";
}

// RTGEN_MATMUL_TUNE_RANKED: tuning a shape appends its finalists to the file, one tune-cache
// line each, ranks 0, 1, ... fastest first, each line's bytes the algorithm its note names;
// tuning's own choice is among them (by candidate index, with its bytes), and a ranked line used
// as a one-line cache runs and meets the reference.
TEST(MatmulTuneCacheTest, RankedCandidatesAreWrittenFastestFirst) {
  if (kernels::EnvIs("RTGEN_MATMUL_TUNE", "0")) GTEST_SKIP() << "RTGEN_MATMUL_TUNE=0";
  if (kernels::EnvValue("RTGEN_MATMUL_TUNE_RANKED")[0] != '\0') {
    GTEST_SKIP() << "RTGEN_MATMUL_TUNE_RANKED is set (the test sets its own)";
  }
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  // A shape no other test (nor an earlier repeat of this one: a tuned shape is not tuned again
  // in a process) tunes.
  static int repeat = 0;
  const int m = 44, n = 640 + 16 * repeat++, k = 1280;
  const Operands ops(m, n, k, rng);
  const testing::ScopedTempPath ranked("ranked.tsv", {});
  const testing::ScopedTempPath own_cache("own.tsv", {".lock"});
  const testing::ScopedTempPath one("one.tsv", {".lock"});
  // An empty cache of its own: a process RTGEN_MATMUL_TUNE_CACHE holding this shape (from an
  // earlier run) would spare it the tuning this test needs.
  const auto ctx = ContextWithCache(own_cache.path());
  ASSERT_NE(ctx, nullptr);
  ctx->AllowTuning(true);
  ASSERT_EQ(setenv("RTGEN_MATMUL_TUNE_RANKED", ranked.path().c_str(), 1), 0);
  ops.Run(*ctx, "");
  unsetenv("RTGEN_MATMUL_TUNE_RANKED");
  // "<algo>; tuned: candidate <best> of ..." where tuning chose.
  const std::string info = ctx->PlanInfo(m, n, k, false);
  const std::string tuned = "; tuned: candidate ";
  const size_t tuned_at = info.find(tuned), best_at = tuned_at + tuned.size();
  ASSERT_NE(tuned_at, std::string::npos) << info;
  const std::string best = info.substr(best_at, info.find(' ', best_at) - best_at);

  std::ifstream in(ranked.path());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_FALSE(lines.empty()) << "nothing appended to " << ranked.path() << "; plan " << info;
  float previous_us = 0.0f;
  bool chosen_listed = false;
  for (size_t r = 0; r < lines.size(); ++r) {
    SCOPED_TRACE(lines[r]);
    auto table = MatmulTuneCache::Parse(lines[r] + "\n", "ranked line");
    ASSERT_TRUE(table.ok()) << table.status();
    const auto e = table->Find(ctx->device_tag(), kernels::MatmulTuneModeName(),
                               {m, n, k, false, false});
    ASSERT_TRUE(e);
    // The note: "<algo>; rank r of N, candidate i, <us> us alone".
    const std::string rank = "; rank " + std::to_string(r) + " of " +
                             std::to_string(lines.size()) + ", candidate ";
    const size_t at = e->note.find(rank);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(e->note.substr(0, at), kernels::MatmulAlgoInfo(e->algo));
    const size_t index_at = at + rank.size(), comma = e->note.find(", ", index_at);
    ASSERT_NE(comma, std::string::npos);
    const float us = std::stof(e->note.substr(comma + 2));
    EXPECT_GE(us, previous_us);
    previous_us = us;
    if (e->note.substr(index_at, comma - index_at) == best) {
      chosen_listed = true;
      EXPECT_EQ(info.substr(0, tuned_at), kernels::MatmulAlgoInfo(e->algo));
    }
  }
  EXPECT_TRUE(chosen_listed) << "tuning's choice is not among the ranked lines: " << info;

  // The slowest ranked candidate as a one-line cache: a fresh context runs it, not tuning's.
  {
    std::ofstream out(one.path());
    out << lines.back() << "\n";
  }
  const auto other = ContextWithCache(one.path());
  ASSERT_NE(other, nullptr);
  ops.Run(*other, "from the tune cache");
}

}  // namespace
}  // namespace rtgen::testing_gpu
