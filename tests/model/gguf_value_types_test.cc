// Metadata copied from one GGUF to another (GgufWriter::AddValue, as rtgen-synth-model's
// --tokenizer-from does) keeps each value's GGUF type: llama.cpp reads e.g. the token ids as
// UINT32 and refuses another type.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model_writer.h"
#include "engine/model/gguf_types.h"
#include "engine/model/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::WriteTempFile;

// The GGUF value type written after `key` in the file bytes (its length-prefixed name), and for an
// array its element type; {-1, -1} when the key is not there.
std::pair<int64_t, int64_t> RawTypeOf(const std::string& bytes, const std::string& key) {
  std::string pattern(8, '\0');
  const uint64_t len = key.size();
  std::memcpy(pattern.data(), &len, 8);  // little-endian host, as GGUF
  pattern += key;
  const size_t at = bytes.find(pattern);
  if (at == std::string::npos || at + pattern.size() + 8 > bytes.size()) return {-1, -1};
  uint32_t type = 0, elem = 0;
  std::memcpy(&type, bytes.data() + at + pattern.size(), 4);
  std::memcpy(&elem, bytes.data() + at + pattern.size() + 4, 4);
  const bool array = type == static_cast<uint32_t>(GgufValueType::kArray);
  return {type, array ? int64_t{elem} : int64_t{-1}};
}

// Every value of `source` copied into a new file through AddValue.
std::string CopyAll(const GgufFile& source) {
  GgufWriter w;
  for (const auto& [key, value] : source.metadata()) w.AddValue(key, value);
  return *w.Serialize();
}

TEST(GgufValueTypesTest, CopiedValuesKeepTheirTypes) {
  GgufWriter w;
  w.AddRawValue("u8", 0, std::string(1, '\x07'));
  w.AddRawValue("i8", 1, std::string(1, '\xff'));
  w.AddRawValue("u16", 2, std::string("\x01\x02", 2));
  w.AddRawValue("i16", 3, std::string("\xfe\xff", 2));
  w.AddUint32("u32", 1);
  w.AddInt32("i32", -7);
  w.AddUint64("u64", 5);
  w.AddInt64("i64", -5);
  w.AddFloat32("f32", 0.5f);
  w.AddFloat64("f64", 0.1);
  // Arrays: UINT8 (as llama.cpp's precompiled_charsmap) and FLOAT64 elements.
  std::string u8s;
  const uint32_t u8_type = 0;
  const uint64_t count = 3;
  u8s.append(reinterpret_cast<const char*>(&u8_type), 4);
  u8s.append(reinterpret_cast<const char*>(&count), 8);
  u8s += std::string("\x01\x02\xff", 3);
  w.AddRawValue("u8_array", static_cast<uint32_t>(GgufValueType::kArray), u8s);
  std::string f64s;
  const uint32_t f64_type = static_cast<uint32_t>(GgufValueType::kFloat64);
  const uint64_t two = 2;
  const double values[2] = {0.1, -2.5};
  f64s.append(reinterpret_cast<const char*>(&f64_type), 4);
  f64s.append(reinterpret_cast<const char*>(&two), 8);
  f64s.append(reinterpret_cast<const char*>(values), sizeof(values));
  w.AddRawValue("f64_array", static_cast<uint32_t>(GgufValueType::kArray), f64s);
  const std::string original = *w.Serialize();
  auto file = GgufFile::Open(WriteTempFile("types.gguf", original));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string copy = CopyAll(**file);
  for (const auto& [key, value] : (*file)->metadata()) {
    EXPECT_EQ(RawTypeOf(copy, key), RawTypeOf(original, key)) << key;
  }
  // The values survive too (f64 exactly: no round trip through float).
  auto copied = GgufFile::Open(WriteTempFile("types_copy.gguf", copy));
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*(*copied)->GetFloat("f64"), 0.1);
  EXPECT_EQ(*(*copied)->GetInt("u8"), 7);
  EXPECT_EQ(*(*copied)->GetInt("i16"), -2);
  EXPECT_EQ(*(*copied)->GetIntArray("u8_array"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*(*copied)->GetFloatArray("f64_array"), (std::vector<double>{0.1, -2.5}));
}

// The real tokenizer's metadata, copied as rtgen-synth-model --tokenizer-from does.
TEST(GgufValueTypesTest, CopiedTokenizerKeepsTheRealFilesTypes) {
  auto source = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(source.ok()) << source.status();
  GgufWriter w;
  ASSERT_GT(CopyTokenizerMetadata(**source, &w), 0);
  const std::string copy = *w.Serialize();
  std::ifstream in(kSmolLm2Path, std::ios::binary);
  std::string head(8 << 20, '\0');  // the metadata lies at the start of the file
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  int checked = 0;
  for (const auto& [key, value] : (*source)->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    EXPECT_EQ(RawTypeOf(copy, key), RawTypeOf(head, key)) << key;
    ++checked;
  }
  EXPECT_GT(checked, 3);
  EXPECT_EQ(RawTypeOf(copy, "tokenizer.ggml.bos_token_id").first,
            static_cast<int64_t>(GgufValueType::kUint32));
}

}  // namespace
}  // namespace rtgen
