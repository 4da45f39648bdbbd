// GgufFile on corrupt input: every case must return an error (never crash or read out of
// bounds; run under ASan via -DRTGEN_SANITIZE=address,undefined to check the latter), tensors
// whose data overlap included.

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::WriteTempFile;

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

void PatchU64(std::string* bytes, size_t offset, uint64_t v) {
  std::memcpy(bytes->data() + offset, &v, 8);
}

absl::Status OpenBytes(const std::string& bytes) {
  return GgufFile::Open(WriteTempFile("corrupt.gguf", bytes)).status();
}

// A small valid file with metadata of several types and two tensors.
std::string ValidFile() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.block_count", 1);
  w.AddFloat32("llama.rope.freq_base", 10000.0f);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1});
  w.AddBool("b", true);
  std::vector<float> a(64, 0.5f), b(32, -1.0f);
  EXPECT_TRUE(w.AddTensor("blk.0.attn_q.weight", {32, 2}, GgmlType::kQ8_0, a).ok());
  EXPECT_TRUE(w.AddTensor("blk.0.attn_norm.weight", {32}, GgmlType::kF32, b).ok());
  return *w.Serialize();
}

TEST(GgufCorruptTest, ValidFileOpens) {
  EXPECT_TRUE(OpenBytes(ValidFile()).ok());
}

TEST(GgufCorruptTest, BadMagic) {
  std::string bytes = ValidFile();
  bytes[0] = 'X';
  const absl::Status s = OpenBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "bad magic")) << s;
}

TEST(GgufCorruptTest, BadVersion) {
  std::string bytes = ValidFile();
  bytes[4] = 7;
  const absl::Status s = OpenBytes(bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "version")) << s;
}

TEST(GgufCorruptTest, EveryTruncationFails) {
  const std::string bytes = ValidFile();
  // The file ends exactly where the last tensor's data (32 F32 values) ends, so every
  // shorter prefix misses some header byte, the data section start, or tensor data.
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const absl::Status s = OpenBytes(bytes.substr(0, cut));
    ASSERT_FALSE(s.ok()) << "cut at " << cut << " of " << bytes.size();
  }
}

TEST(GgufCorruptTest, TruncationMessageNamesTensorInfo) {
  const std::string bytes = ValidFile();
  // Find the second tensor's name in the header and cut right after it.
  const std::string name = "blk.0.attn_norm.weight";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const absl::Status s = OpenBytes(bytes.substr(0, at + name.size() + 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "truncated while reading tensor info 1 ('blk.0.attn_norm.weight')"))
      << s;
}

TEST(GgufCorruptTest, TruncatedRealFileHeaderFails) {
  std::ifstream in(kSmolLm2Path, std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string head(3 << 20, '\0');  // the metadata (tokenizer) is about 2 MB
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  for (size_t cut : {0ul, 3ul, 8ul, 23ul, 24ul, 100ul, 1000ul, 50000ul, 1000000ul, 3ul << 20}) {
    const absl::Status s = OpenBytes(head.substr(0, cut));
    ASSERT_FALSE(s.ok()) << "cut at " << cut;
  }
}

TEST(GgufCorruptTest, HugeCountsAreRejected) {
  std::string bytes = ValidFile();
  PatchU64(&bytes, 8, 1ull << 62);  // tensor_count
  EXPECT_TRUE(absl::StrContains(OpenBytes(bytes).message(), "tensor_count"));
  bytes = ValidFile();
  PatchU64(&bytes, 16, ~0ull);  // kv_count
  EXPECT_TRUE(absl::StrContains(OpenBytes(bytes).message(), "kv_count"));
  bytes = ValidFile();
  PatchU64(&bytes, 24, 1ull << 40);  // length of the first key
  EXPECT_FALSE(OpenBytes(bytes).ok());
}

TEST(GgufCorruptTest, HugeArrayLengthIsRejected) {
  GgufWriter w;
  w.AddRawValue("arr", 9, U32(5) + U64(1ull << 60) + U32(1));
  const absl::Status s = OpenBytes(*w.Serialize());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "arr")) << s;
}

TEST(GgufCorruptTest, ArraysPastTheElementLimitAreRejected) {
  // 2^24 + 1 uint8 elements (16 MiB of file) would be held as 128 MiB of int64: refused by the
  // limit, before the file's size is asked.
  GgufWriter w;
  w.AddRawValue("tokens", 9, U32(0) + U64((1ull << 24) + 1) + std::string(16, '\0'));
  const absl::Status s = OpenBytes(*w.Serialize());
  EXPECT_TRUE(absl::StrContains(s.message(), "16777216-element limit")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "tokens")) << s;
}

TEST(GgufCorruptTest, WrongMetadataTypes) {
  struct Case {
    const char* what;
    uint32_t type;
    std::string payload;
  } cases[] = {
      {"invalid value type", 13, ""},
      {"bool not 0 or 1", 7, std::string(1, '\2')},
      {"nested arrays", 9, U32(9) + U64(1) + U32(5) + U64(0)},
      {"invalid array element type", 9, U32(77) + U64(1)},
      {"uint64 beyond int64", 10, U64(~0ull)},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    w.AddRawValue("key", c.type, c.payload);
    const absl::Status s = OpenBytes(*w.Serialize());
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_TRUE(absl::StrContains(s.message(), "'key'")) << c.what << ": " << s;
  }
}

TEST(GgufCorruptTest, BadAlignment) {
  GgufWriter w;
  w.AddString("general.alignment", "32");
  EXPECT_TRUE(absl::StrContains(OpenBytes(*w.Serialize()).message(), "general.alignment"));
  GgufWriter w3;
  w3.AddUint32("general.alignment", 3);
  EXPECT_TRUE(absl::StrContains(OpenBytes(*w3.Serialize()).message(), "general.alignment"));
}

TEST(GgufCorruptTest, DuplicateKeysAndTensors) {
  GgufWriter w;
  w.AddInt32("k", 1);
  w.AddInt32("k", 2);
  EXPECT_TRUE(absl::StrContains(OpenBytes(*w.Serialize()).message(), "duplicate"));
  GgufWriter t;
  t.AddRawTensor("x", {1}, 0, std::string(4, '\0'));
  t.AddRawTensor("x", {1}, 0, std::string(4, '\0'));
  EXPECT_TRUE(absl::StrContains(OpenBytes(*t.Serialize()).message(), "duplicate"));
}

TEST(GgufCorruptTest, TensorDataOutOfBounds) {
  GgufWriter w;
  w.AddRawTensor("big", {1024}, 0, std::string(16, '\0'));  // needs 4096 bytes
  const absl::Status s = OpenBytes(*w.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "'big'")) << s;
}

TEST(GgufCorruptTest, BadTensorShapes) {
  struct Case {
    const char* what;
    std::vector<int64_t> dims;
    uint32_t type;
  } cases[] = {
      {"five dims", {1, 1, 1, 1, 1}, 0},
      {"element count overflow", {1ll << 32, 1ll << 32, 1ll << 32}, 0},
      {"row not a multiple of the block", {33}, 8},
      {"zero dim", {0}, 0},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    w.AddRawTensor("t", c.dims, c.type, std::string(64, '\0'));
    const absl::Status s = OpenBytes(*w.Serialize());
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_TRUE(absl::StrContains(s.message(), "'t'")) << c.what << ": " << s;
  }
}

TEST(GgufCorruptTest, MisalignedTensorOffset) {
  std::string bytes = ValidFile();
  // The second tensor info ends with its uint64 offset; make it 4 (not a multiple of 32).
  const std::string name = "blk.0.attn_norm.weight";
  const size_t at = bytes.find(name) + name.size() + 4 + 8 + 4;
  PatchU64(&bytes, at, 4);
  EXPECT_TRUE(absl::StrContains(OpenBytes(bytes).message(), "aligned"));
}

TEST(GgufCorruptTest, OverlappingTensorDataIsRefused) {
  std::string bytes = ValidFile();
  // blk.0.attn_q.weight (Q8_0, 68 bytes) lies at 0; move blk.0.attn_norm.weight (128 bytes) from
  // 96 to 64: aligned and inside the file, but sharing bytes 64-67 with the first.
  const std::string name = "blk.0.attn_norm.weight";
  const size_t at = bytes.find(name) + name.size() + 4 + 8 + 4;
  PatchU64(&bytes, at, 64);
  const absl::Status s = OpenBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "overlaps")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "blk.0.attn_norm.weight")) << s;
  PatchU64(&bytes, at, 96);  // back where it was: opens
  EXPECT_TRUE(OpenBytes(bytes).ok());
}

TEST(GgufCorruptTest, UnsupportedTensorTypes) {
  GgufWriter w;
  w.AddRawTensor("k6", {256}, 14, std::string(210, '\0'));  // Q6_K: opens, cannot dequantise
  auto file = GgufFile::Open(WriteTempFile("q6k.gguf", *w.Serialize()));
  ASSERT_TRUE(file.ok()) << file.status();
  auto read = (*file)->ReadTensorF32(*(*file)->FindTensor("k6"));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(read.status().message(), "unsupported tensor type 14 (Q6_K) for 'k6'"))
      << read.status();
  GgufWriter u;
  u.AddRawTensor("x", {4}, 99, std::string(64, '\0'));  // unknown type id: size unknown
  const absl::Status s = OpenBytes(*u.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "'x'")) << s;
}

TEST(GgufCorruptTest, ReadTensorRejectsForeignInfo) {
  auto file = GgufFile::Open(WriteTempFile("ok.gguf", ValidFile()));
  ASSERT_TRUE(file.ok());
  GgufTensorInfo fake{"fake", {1 << 20}, 0, 0};
  EXPECT_EQ((*file)->ReadTensorF32(fake).status().code(), absl::StatusCode::kDataLoss);
}

TEST(GgufCorruptTest, EmptyFileAndDirectory) {
  EXPECT_FALSE(OpenBytes("").ok());
  EXPECT_FALSE(GgufFile::Open(::testing::TempDir()).ok());
}

}  // namespace
}  // namespace rtgen
