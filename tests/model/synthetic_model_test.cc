#include "engine/model/synthetic_model.h"

#include <cmath>
#include <string>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/model_weights.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::UniqueTempPath;

TEST(SyntheticModelTest, ShapesAndDtypes) {
  auto s = SyntheticShape("smollm2-135m");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->head_dim, 64);
  EXPECT_TRUE(s->Validate().ok());
  auto l = SyntheticShape("llama3.2-1b");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->rope_scaling.has_value());
  EXPECT_TRUE(SyntheticShape("llama3-8b")->Validate().ok());
  EXPECT_FALSE(SyntheticShape("gpt5").ok());
  EXPECT_EQ(*ParseGgmlDtype("q4_1"), GgmlType::kQ4_1);
  EXPECT_FALSE(ParseGgmlDtype("q6_k").ok());
}

TEST(SyntheticModelTest, TinyModelWithSmolLm2TokenizerLoads) {
  auto tok = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  SyntheticModelOptions options;
  options.config = *SyntheticShape("tiny");
  options.dtype = GgmlType::kQ8_0;
  options.seed = 42;
  options.tokenizer_from = tok->get();
  GgufWriter writer;
  ASSERT_TRUE(BuildSyntheticGguf(options, &writer).ok());
  const std::string path = UniqueTempPath("tiny.gguf");
  ASSERT_TRUE(writer.WriteFile(path).ok());

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(*(*file)->GetStringArray("tokenizer.ggml.tokens"),
            *(*tok)->GetStringArray("tokenizer.ggml.tokens"));
  EXPECT_EQ(*(*file)->GetStringArray("tokenizer.ggml.merges"),
            *(*tok)->GetStringArray("tokenizer.ggml.merges"));
  EXPECT_EQ(*(*file)->GetIntArray("tokenizer.ggml.token_type"),
            *(*tok)->GetIntArray("tokenizer.ggml.token_type"));
  EXPECT_EQ(*(*file)->GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*(*file)->GetString("tokenizer.chat_template"),
            *(*tok)->GetString("tokenizer.chat_template"));
  auto w = LoadGgufWeights(**file, *c);
  ASSERT_TRUE(w.ok()) << w.status();
  // Matrix weights ~ N(0, 0.02), norms ~ 1.
  double sum_sq = 0;
  for (float v : w->layers[0].w_up.data) sum_sq += v * v;
  const double std = std::sqrt(sum_sq / w->layers[0].w_up.data.size());
  EXPECT_NEAR(std, 0.02, 0.002);
  for (float v : w->final_norm) EXPECT_NEAR(v, 1.0f, 0.15f);
}

TEST(SyntheticModelTest, SameSeedSameWeightsOtherSeedDiffers) {
  const auto a = SyntheticTensor(1, "blk.0.attn_q.weight", 100, false);
  EXPECT_EQ(a, SyntheticTensor(1, "blk.0.attn_q.weight", 100, false));
  EXPECT_NE(a, SyntheticTensor(2, "blk.0.attn_q.weight", 100, false));
  EXPECT_NE(a, SyntheticTensor(1, "blk.0.attn_k.weight", 100, false));
}

TEST(SyntheticModelTest, Llama3RopeScalingSurvivesTheFile) {
  SyntheticModelOptions options;
  options.config = *SyntheticShape("tiny");
  options.config.rope_theta = 500000.0f;
  options.config.rope_scaling = Llama3RopeScaling{8.0f, 1.0f, 4.0f, 64};
  GgufWriter writer;
  ASSERT_TRUE(BuildSyntheticGguf(options, &writer).ok());
  const std::string path = UniqueTempPath("rope.gguf");
  ASSERT_TRUE(writer.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto c = ModelConfig::FromGguf(**file);
  // original_max_position_embeddings 64 is not Llama 3's 8192: the reader must refuse
  // rather than silently assume the default.
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << c.status();
}

}  // namespace
}  // namespace rtgen
