// The tune cache's file (kernels/matmul_tune_cache.h), host code only: its round trip, the
// merge of two processes' entries, its refusals and its errors; read-only tables and the shipped
// ones.

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "kernels/matmul_tune_cache.h"
#include "kernels/shipped_tune_table.h"
#include "tests/unique_temp_path.h"

namespace rtgen::kernels {
namespace {

// The cache file's path; the file and its lock are removed at the end.
class TempPath : public testing::ScopedTempPath {
 public:
  TempPath() : ScopedTempPath("tune.tsv", {".lock"}) {}
  const std::string& file() const { return path(); }
};

MatmulTuneCache::AlgoBytes Bytes(uint64_t first) {
  MatmulTuneCache::AlgoBytes b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = first * 0x9e3779b97f4a7c15ull + i;
  return b;
}

TEST(MatmulTuneCacheFileTest, FileRoundTripKeepsEveryDevice) {
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

TEST(MatmulTuneCacheFileTest, MalformedFileIsAnErrorNamingTheLine) {
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

// A path that opens but cannot be read (a directory: the first read fails with EISDIR) is an
// error naming it, not an empty cache that a Put would then write over.
TEST(MatmulTuneCacheFileTest, UnreadablePathIsAnErrorNamingIt) {
  const std::string dir = testing::UniqueTempPath("tune_dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  const auto cache = MatmulTuneCache::Load(dir);
  rmdir(dir.c_str());
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kUnavailable) << cache.status();
  EXPECT_NE(cache.status().message().find(dir), std::string::npos) << cache.status();
}

TEST(MatmulTuneCacheFileTest, UnwritablePathIsAnErrorAndTheEntryStaysInMemory) {
  auto cache = MatmulTuneCache::Load(testing::UniqueTempPath("no_such_dir") + "/tune.tsv");
  ASSERT_TRUE(cache.ok()) << cache.status();  // missing: empty
  const MatmulTuneCache::Shape s{16, 4096, 4096, false, true};
  const absl::Status st = cache->Put("gpu", "list", s, {Bytes(9), "x"});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("no_such_dir"), std::string::npos) << st;
  const auto e = cache->Find("gpu", "list", s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->algo, Bytes(9));
}

TEST(MatmulTuneCacheFileTest, ParsedTableSkipsCommentsAndIsReadOnly) {
  const std::string hex(128, 'a');
  const std::string line = "gpu\twide\t8\t16\t32\t0\t1\t" + hex + "\tnote\n";
  auto table = MatmulTuneCache::Parse("# a comment\n\n" + line, "a table");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 1u);
  const auto e = table->Find("gpu", "wide", {8, 16, 32, false, true});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->algo[0], 0xaaaaaaaaaaaaaaaaull);
  EXPECT_EQ(e->note, "note");
  const absl::Status put = table->Put("gpu", "wide", {1, 1, 1, false, false}, {Bytes(1), ""});
  EXPECT_EQ(put.code(), absl::StatusCode::kFailedPrecondition) << put;
  EXPECT_NE(put.message().find("a table"), std::string::npos) << put;
  const auto bad = MatmulTuneCache::Parse(line + "gpu\twide\t8\n", "a table");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a table line 2"), std::string::npos) << bad.status();
}

// FormatLine (what RTGEN_MATMUL_TUNE_RANKED appends, one line per candidate) is a line that
// Parse reads back to the same key and entry; an empty note is written as "-".
TEST(MatmulTuneCacheFileTest, FormattedLineParsesBack) {
  const MatmulTuneCache::Shape shape{64, 4096, 14336, false, true};
  const std::string line = MatmulTuneCache::FormatLine(
      "gpu sm_90 132 SMs", "wide", shape, {Bytes(7), "rank 2 of 32, 33.9 us alone"});
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  auto table = MatmulTuneCache::Parse(
      line + MatmulTuneCache::FormatLine("gpu", "list", {1, 2, 3, true, false}, {Bytes(8), ""}),
      "formatted");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  const auto e = table->Find("gpu sm_90 132 SMs", "wide", shape);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->algo, Bytes(7));
  EXPECT_EQ(e->note, "rank 2 of 32, 33.9 us alone");
  EXPECT_FALSE(table->Find("gpu sm_90 132 SMs", "wide", {64, 4096, 14336, false, false}));
  const auto f32 = table->Find("gpu", "list", {1, 2, 3, true, false});
  ASSERT_TRUE(f32);
  EXPECT_EQ(f32->algo, Bytes(8));
  EXPECT_EQ(f32->note, "-");
}

// The tables of kernels/tuned_matmul compiled in: they parse (a malformed one would be dropped
// with a message at run time), and hold the wide search's choices, for positive shapes only.
TEST(MatmulTuneCacheFileTest, ShippedTablesParse) {
  const auto parsed = MatmulTuneCache::Parse(ShippedTuneTableText(), "shipped");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const MatmulTuneCache& shipped = MatmulTuneCache::Shipped();
  ASSERT_GT(shipped.size(), 0u) << "no table in kernels/tuned_matmul";
  EXPECT_EQ(shipped.size(), parsed->size());
  size_t seen = 0;
  shipped.ForEach([&](const std::string& tag, const std::string& mode,
                      const MatmulTuneCache::Shape& s, const MatmulTuneCache::Entry& e) {
    ++seen;
    EXPECT_FALSE(tag.empty());
    EXPECT_EQ(mode, "wide") << tag << " " << s.m << "x" << s.n << "x" << s.k;
    EXPECT_TRUE(s.m > 0 && s.n > 0 && s.k > 0);
    EXPECT_NE(e.algo, MatmulTuneCache::AlgoBytes{}) << "an all-zero algorithm";
  });
  EXPECT_EQ(seen, shipped.size());
}

// The lent GPUs each have their table (kernels/tuned_matmul): an H200 and an H100 80GB HBM3 start
// without timing the decode buckets' cuBLASLt shapes (64 of them or more each).
TEST(MatmulTuneCacheFileTest, ShippedTablesCoverTheH200AndTheH100) {
  std::map<std::string, size_t> per_tag;
  MatmulTuneCache::Shipped().ForEach([&](const std::string& tag, const std::string&,
                                         const MatmulTuneCache::Shape&,
                                         const MatmulTuneCache::Entry&) { ++per_tag[tag]; });
  size_t h200 = 0, h100 = 0;
  for (const auto& [tag, n] : per_tag) {
    if (tag.rfind("NVIDIA H200 sm_90 132 SMs cublasLt ", 0) == 0) h200 += n;
    if (tag.rfind("NVIDIA H100 80GB HBM3 sm_90 132 SMs cublasLt ", 0) == 0) h100 += n;
  }
  EXPECT_GE(h200, 64u) << "the H200's table (nvidia_h200_*.tsv) is missing or cut short";
  EXPECT_GE(h100, 64u) << "the H100's table (nvidia_h100_*.tsv) is missing or cut short";
}

}  // namespace
}  // namespace rtgen::kernels
