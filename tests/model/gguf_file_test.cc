#include "engine/model/gguf_file.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/model/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::WriteTempFile;

TEST(GgufFileTest, MetadataRoundTripsEveryValueType) {
  GgufWriter w;
  w.AddString("s", "hello");
  w.AddUint32("u32", 4000000000u);
  w.AddInt32("i32", -7);
  w.AddUint64("u64", 1ull << 40);
  w.AddInt64("i64", -(1ll << 40));
  w.AddFloat32("f32", 0.5f);
  w.AddFloat64("f64", 1e-300);
  w.AddBool("b", true);
  w.AddRawValue("u8", 0, std::string(1, '\xff'));
  w.AddRawValue("i8", 1, std::string(1, '\xff'));
  w.AddRawValue("u16", 2, std::string("\xff\xff", 2));
  w.AddRawValue("i16", 3, std::string("\xfe\xff", 2));
  w.AddStringArray("sa", {"a", "", "ccc"});
  w.AddInt32Array("ia", {1, -2, 3});
  w.AddFloat32Array("fa", {0.25f, -1.0f});
  const std::string path = WriteTempFile("meta.gguf", *w.Serialize());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("s"), "hello");
  EXPECT_EQ(*f.GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*f.GetInt("i32"), -7);
  EXPECT_EQ(*f.GetInt("u64"), 1ll << 40);
  EXPECT_EQ(*f.GetInt("i64"), -(1ll << 40));
  EXPECT_EQ(*f.GetFloat("f32"), 0.5);
  EXPECT_EQ(*f.GetFloat("f64"), 1e-300);
  EXPECT_EQ(*f.GetFloat("i32"), -7.0);  // integers are accepted as floats
  EXPECT_EQ(*f.GetBool("b"), true);
  EXPECT_EQ(*f.GetInt("u8"), 255);
  EXPECT_EQ(*f.GetInt("i8"), -1);
  EXPECT_EQ(*f.GetInt("u16"), 65535);
  EXPECT_EQ(*f.GetInt("i16"), -2);
  EXPECT_EQ(*f.GetStringArray("sa"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f.GetIntArray("ia"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetFloatArray("fa"), (std::vector<double>{0.25, -1.0}));
}

TEST(GgufFileTest, TypedLookupErrorsNameTheKey) {
  GgufWriter w;
  w.AddString("name", "x");
  w.AddInt32Array("ids", {1});
  auto file = GgufFile::Open(WriteTempFile("lookup.gguf", *w.Serialize()));
  ASSERT_TRUE(file.ok()) << file.status();
  auto missing = (*file)->GetInt("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  auto wrong = (*file)->GetInt("name");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("name"), std::string::npos);
  EXPECT_EQ((*file)->GetStringArray("ids").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->GetFloat("name").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->GetString("ids").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufFileTest, F32TensorRoundTripsExactlyWithCustomAlignment) {
  GgufWriter w;
  w.set_alignment(64);
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-20f, -1e20f};
  std::vector<float> b = {7.0f};
  ASSERT_TRUE(w.AddTensor("a", {3, 2}, GgmlType::kF32, a).ok());
  ASSERT_TRUE(w.AddTensor("b", {1}, GgmlType::kF32, b).ok());
  auto file = GgufFile::Open(WriteTempFile("f32.gguf", *w.Serialize()));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const GgufTensorInfo* ta = (*file)->FindTensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ta->num_elements(), 6u);
  EXPECT_EQ(*(*file)->ReadTensorF32(*ta), a);
  EXPECT_EQ(*(*file)->ReadTensorF32(*(*file)->FindTensor("b")), b);
  EXPECT_EQ((*file)->FindTensor("c"), nullptr);
  EXPECT_EQ(*(*file)->GetInt("general.alignment"), 64);
}

TEST(GgufFileTest, ReadsVersion2) {
  GgufWriter w;
  w.set_version(2);
  w.AddString("general.architecture", "llama");
  auto file = GgufFile::Open(WriteTempFile("v2.gguf", *w.Serialize()));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
}

TEST(GgufFileTest, OpensRealSmolLm2) {
  auto file = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  const GgufTensorInfo* q = f.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dims, (std::vector<int64_t>{576, 576}));
  auto values = f.ReadTensorF32(*q);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 576u * 576u);
  double sum_sq = 0;
  for (float v : *values) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += static_cast<double>(v) * v;
  }
  EXPECT_GT(sum_sq, 0.0);
}

TEST(GgufFileTest, MissingFileIsNotFound) {
  auto file = GgufFile::Open("/nonexistent/rtgen.gguf");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rtgen
