#include "engine/model/synthetic_model.h"

#include <cmath>
#include <cstdint>
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

// Parameters of a Llama-shaped model: embedding (and an untied LM head), per layer q, k, v, o,
// gate, up, down and two norms, and the final norm.
int64_t ParameterCount(const ModelConfig& c) {
  const int64_t h = c.hidden_size, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t layer = h * int64_t{c.num_heads} * c.head_dim * 2 + h * kv * 2 +
                        3 * h * c.intermediate_size + 2 * h;
  return int64_t{c.vocab_size} * h * (c.tie_word_embeddings ? 1 : 2) + c.num_layers * layer + h;
}

// The three shapes are the published models': every dimension, and the parameter counts
// of their released checkpoints (SmolLM2-135M 134,515,008; Llama-3.2-1B 1,235,814,400 with tied
// embeddings; Llama-3-8B 8,030,261,248), which a wrong width or layer count would change.
TEST(SyntheticModelTest, ShapesAreThePublishedModels) {
  struct Want {
    const char* name;
    int vocab, hidden, ffn, layers, heads, kv_heads, head_dim;
    float rope_theta;
    bool tied, llama3_scaling;
    int64_t parameters;
  };
  const Want wants[] = {
      {"smollm2-135m", 49152, 576, 1536, 30, 9, 3, 64, 100000.0f, true, false, 134515008},
      {"llama3.2-1b", 128256, 2048, 8192, 16, 32, 8, 64, 500000.0f, true, true, 1235814400},
      {"llama3-8b", 128256, 4096, 14336, 32, 32, 8, 128, 500000.0f, false, false, 8030261248},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    absl::StatusOr<ModelConfig> c = SyntheticShape(w.name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->Validate().ok());
    EXPECT_EQ(c->vocab_size, w.vocab);
    EXPECT_EQ(c->hidden_size, w.hidden);
    EXPECT_EQ(c->intermediate_size, w.ffn);
    EXPECT_EQ(c->num_layers, w.layers);
    EXPECT_EQ(c->num_heads, w.heads);
    EXPECT_EQ(c->num_kv_heads, w.kv_heads);
    EXPECT_EQ(c->head_dim, w.head_dim);
    EXPECT_EQ(c->rope_theta, w.rope_theta);
    EXPECT_EQ(c->rms_norm_eps, 1e-5f);
    EXPECT_EQ(c->tie_word_embeddings, w.tied);
    EXPECT_EQ(c->rope_scaling.has_value(), w.llama3_scaling);
    EXPECT_EQ(ParameterCount(*c), w.parameters);
  }
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
  absl::StatusOr<ModelConfig> built = BuildSyntheticGguf(options, &writer);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->vocab_size, 49152);
  const std::string path = UniqueTempPath("tiny.gguf");
  ASSERT_TRUE(writer.WriteFile(path).ok());

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->hidden_size, 64);
  // Not "synthetic-tiny" (vocabulary 512): the tokenizer's vocabulary made it another shape.
  EXPECT_EQ(c->name, "synthetic-custom");
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

// The file keeps Llama-3 scaling as rope_freqs.weight alone (as llama.cpp writes it): read back,
// the frequencies are checked against Llama 3's own original context (8192), which a scaling
// with another original context does not match.
TEST(SyntheticModelTest, Llama3RopeScalingWithAnotherOriginalContextIsRefused) {
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
  // Refused for the frequencies, not for any other unsupported key.
  EXPECT_NE(c.status().message().find("rope_freqs.weight["), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("does not match Llama-3 rope scaling"), std::string::npos)
      << c.status();
}

}  // namespace
}  // namespace rtgen
