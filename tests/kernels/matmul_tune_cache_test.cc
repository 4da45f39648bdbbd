// The tune cache (kernels/matmul_tune_cache.h): its file round trip, its refusals, and a context
// created later (a restarted server) running the cached choice without tuning.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "kernels/matmul.h"
#include "kernels/matmul_tune_cache.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

using kernels::MatmulTuneCache;

// A fresh file path under the temporary directory, removed with its directory at the end.
class TempPath {
 public:
  TempPath() {
    dir_ = std::filesystem::temp_directory_path() /
           ("rtgen_tune_cache_" + std::to_string(FreshSeed()));
    std::filesystem::create_directories(dir_);
  }
  ~TempPath() { std::filesystem::remove_all(dir_); }
  std::string file() const { return (dir_ / "tune.tsv").string(); }

 private:
  std::filesystem::path dir_;
};

MatmulTuneCache::AlgoBytes Bytes(uint64_t first) {
  MatmulTuneCache::AlgoBytes b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = first * 0x9e3779b97f4a7c15ull + i;
  return b;
}

TEST(MatmulTuneCacheTest, FileRoundTripKeepsEveryDevice) {
  const TempPath tmp;
  auto cache = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(cache.ok()) << cache.status();  // no file yet: empty
  const MatmulTuneCache::Shape s{64, 4096, 4096, false, false};
  MatmulTuneCache::Shape f32 = s, acc = s, rows32 = s;
  f32.y_f32 = true;
  acc.accumulate = true;
  rows32.m = 32;
  EXPECT_FALSE(cache->Find("gpu a", "list", s));
  ASSERT_TRUE(cache->Put("gpu a", "list", s, {Bytes(1), "algo 66"}).ok());
  ASSERT_TRUE(cache->Put("gpu a", "wide", s, {Bytes(2), ""}).ok());
  ASSERT_TRUE(cache->Put("gpu b", "list", f32, {Bytes(3), "b's"}).ok());
  ASSERT_TRUE(cache->Put("gpu a", "list", acc, {Bytes(6), "in place"}).ok());
  ASSERT_TRUE(cache->Put("gpu a", "list", s, {Bytes(4), "again"}).ok());
  auto again = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(again.ok()) << again.status();
  const auto a_list = again->Find("gpu a", "list", s);
  ASSERT_TRUE(a_list);
  EXPECT_EQ(a_list->algo, Bytes(4));  // replaced, not added
  EXPECT_EQ(a_list->note, "again");
  const auto a_wide = again->Find("gpu a", "wide", s);
  ASSERT_TRUE(a_wide);
  EXPECT_EQ(a_wide->algo, Bytes(2));
  const auto b = again->Find("gpu b", "list", f32);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->algo, Bytes(3));
  const auto a_acc = again->Find("gpu a", "list", acc);
  ASSERT_TRUE(a_acc);
  EXPECT_EQ(a_acc->algo, Bytes(6));
  EXPECT_FALSE(again->Find("gpu b", "list", s)) << "fp32 output is keyed";
  EXPECT_FALSE(again->Find("gpu a", "list", rows32));
  // Refused: tabs or newlines, an empty tag, shapes not positive.
  const MatmulTuneCache::Shape one{1, 1, 1, false, false}, zero{0, 1, 1, false, false};
  EXPECT_FALSE(again->Put("gpu\ta", "list", one, {Bytes(5), ""}).ok());
  EXPECT_FALSE(again->Put("", "list", one, {Bytes(5), ""}).ok());
  EXPECT_FALSE(again->Put("gpu a", "list", one, {Bytes(5), "two\nlines"}).ok());
  EXPECT_FALSE(again->Put("gpu a", "list", zero, {Bytes(5), ""}).ok());
  // A second process's entries, written to the file after this one loaded it, survive this
  // one's next write.
  auto other = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->Put("gpu c", "list", s, {Bytes(7), "other"}).ok());
  ASSERT_TRUE(again->Put("gpu a", "list", rows32, {Bytes(8), "later"}).ok());
  auto merged = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(merged.ok());
  EXPECT_TRUE(merged->Find("gpu c", "list", s));
  EXPECT_TRUE(merged->Find("gpu a", "list", rows32));
  EXPECT_EQ(merged->Find("gpu a", "list", s)->algo, Bytes(4));
}

TEST(MatmulTuneCacheTest, MalformedFileIsAnErrorNamingTheLine) {
  const TempPath tmp;
  {
    auto cache = MatmulTuneCache::Load(tmp.file());
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(cache->Put("gpu", "list", {8, 16, 32, false, false}, {Bytes(1), "ok"}).ok());
  }
  std::ofstream(tmp.file(), std::ios::app) << "gpu\tlist\t8\t16\t32\t2\t0\tabc\tbad\n";
  const auto bad = MatmulTuneCache::Load(tmp.file());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find(tmp.file()), std::string::npos) << bad.status();
  EXPECT_FALSE(MatmulTuneCache::Load("").ok());
}

// One process tunes a decode shape with the cache attached (the choice is written); a context
// with the file loaded afresh (as after a restart) runs that choice without tuning, bitwise equal.
TEST(MatmulTuneCacheTest, RestartedContextRunsTheCachedChoice) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int m = 40, n = 1024, k = 768;  // a shape no other test tunes
  const std::vector<uint16_t> x = ToBf16(RandomNormal(size_t{1} * m * k, 1.0f, rng));
  const std::vector<uint16_t> w = ToBf16(RandomNormal(size_t{1} * n * k, 0.05f, rng));
  DeviceArray<uint16_t> d_x(x), d_w(w);
  const TempPath tmp;
  const auto run = [&](kernels::MatmulContext& ctx) {
    DeviceArray<uint16_t> y(size_t{1} * m * n);
    const absl::Status st =
        kernels::Matmul(ctx, {d_x.bf16(), d_w.bf16(), y.bf16(), false, m, n, k}, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    return y.ToHost();
  };
  auto first = kernels::MatmulContext::Create(false, true);
  ASSERT_TRUE(first.ok()) << first.status();
  auto cache = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(cache.ok());
  (*first)->UseTuneCache(std::make_shared<MatmulTuneCache>(*std::move(cache)));
  (*first)->AllowTuning(true);
  const std::vector<uint16_t> want = run(**first);
  EXPECT_LE(RelL2(FromBf16(want), MatmulReference(x, w, m, n, k)), 1e-2);
  const std::string first_info = (*first)->PlanInfo(m, n, k, false);

  auto loaded = MatmulTuneCache::Load(tmp.file());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto entry = loaded->Find((*first)->device_tag(), kernels::MatmulTuneModeName(),
                                  {m, n, k, false, false});
  ASSERT_TRUE(entry) << "the tuned choice was not written to " << tmp.file();
  EXPECT_EQ(entry->note, first_info);
  auto restarted = kernels::MatmulContext::Create(false, true);
  ASSERT_TRUE(restarted.ok());
  (*restarted)->UseTuneCache(std::make_shared<MatmulTuneCache>(*std::move(loaded)));
  const std::vector<uint16_t> got = run(**restarted);  // tuning not allowed here
  // The plan's info is what shows the cache was read: the process-wide choice of the first
  // context would give the same bits without it.
  const std::string info = (*restarted)->PlanInfo(m, n, k, false);
  EXPECT_EQ(info.rfind("from the tune cache", 0), 0u) << info;
  EXPECT_EQ(got, want) << "the cached choice gave other bits";
}

}  // namespace
}  // namespace rtgen::testing_gpu
