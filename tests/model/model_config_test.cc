#include "engine/model/model_config.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model_writer.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/llama3_rope.h"
#include "engine/common/json_nesting.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::WriteTempFile;

ModelConfig SmallConfig() {
  ModelConfig c;
  c.vocab_size = 100;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  return c;
}

TEST(ModelConfigTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(SmallConfig().Validate().ok());
  ModelConfig c = SmallConfig();
  c.num_kv_heads = 3;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "num_kv_heads"));
  c = SmallConfig();
  c.intermediate_size = 0;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "intermediate_size"));
  c = SmallConfig();
  c.head_dim = 15;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "head_dim"));
  c = SmallConfig();
  c.rms_norm_eps = 0;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "rms_norm_eps"));
  c = SmallConfig();
  c.rope_scaling = Llama3RopeScaling{8.0f, 4.0f, 1.0f, 8192};
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "high_freq_factor"));
}

// +inf passes a `> 0` check: an infinite rope_theta would turn RoPE off past the first pair of
// dimensions and an infinite rms_norm_eps would zero every norm.
TEST(ModelConfigTest, ValidateRefusesInfiniteReals) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelConfig c = SmallConfig();
  c.rope_theta = inf;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "rope_theta must be finite")) <<
      c.Validate();
  c = SmallConfig();
  c.rms_norm_eps = inf;
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "rms_norm_eps must be finite"));
  c = SmallConfig();
  c.rope_scaling = Llama3RopeScaling{inf, 1.0f, 4.0f, 8192};
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "rope_scaling.factor"));
  c = SmallConfig();
  c.rope_scaling = Llama3RopeScaling{8.0f, 1.0f, inf, 8192};
  EXPECT_TRUE(absl::StrContains(c.Validate().message(), "high_freq_factor"));
  c = SmallConfig();
  c.rope_theta = std::nanf("");
  EXPECT_FALSE(c.Validate().ok());
}

TEST(ModelConfigTest, RealSmolLm2FromGguf) {
  auto file = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->max_position_embeddings, 8192);
  EXPECT_EQ(c->rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_FALSE(c->name.empty());
}

// Minimal llama metadata; `skip` leaves one key out.
GgufWriter LlamaMetadata(const std::string& skip = "") {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  auto add = [&](const std::string& key, uint32_t v) {
    if (key != skip) w.AddUint32(key, v);
  };
  add("llama.block_count", 2);
  add("llama.context_length", 512);
  add("llama.embedding_length", 64);
  add("llama.feed_forward_length", 128);
  add("llama.attention.head_count", 4);
  if (skip != "llama.attention.layer_norm_rms_epsilon") {
    w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  }
  return w;
}

absl::StatusOr<ModelConfig> ConfigOf(const GgufWriter& w) {
  auto file = GgufFile::Open(WriteTempFile("cfg.gguf", *w.Serialize()));
  if (!file.ok()) return file.status();
  return ModelConfig::FromGguf(**file);
}

TEST(ModelConfigTest, GgufDefaults) {
  GgufWriter w = LlamaMetadata();
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e"});
  w.AddRawTensor("output.weight", {1}, 0, std::string(4, '\0'));
  auto c = ConfigOf(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 4);   // defaults to head_count
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->vocab_size, 5);     // from the token list
  EXPECT_EQ(c->head_dim, 16);      // hidden / heads
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
}

TEST(ModelConfigTest, GgufMissingOrWrongKeysAreNamed) {
  for (const std::string key : {"llama.block_count", "llama.embedding_length",
                                "llama.attention.head_count",
                                "llama.attention.layer_norm_rms_epsilon"}) {
    GgufWriter w = LlamaMetadata(key);
    w.AddUint32("llama.vocab_size", 10);
    auto c = ConfigOf(w);
    EXPECT_FALSE(c.ok()) << key;
    EXPECT_TRUE(absl::StrContains(c.status().message(), key)) << c.status();
  }
  GgufWriter w = LlamaMetadata("llama.block_count");
  w.AddString("llama.block_count", "two");
  w.AddUint32("llama.vocab_size", 10);
  auto c = ConfigOf(w);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "llama.block_count")) << c.status();
  GgufWriter nov = LlamaMetadata();
  EXPECT_TRUE(absl::StrContains(ConfigOf(nov).status().message(), "vocab_size"));
  GgufWriter arch;
  arch.AddString("general.architecture", "gpt2");
  EXPECT_EQ(ConfigOf(arch).status().code(), absl::StatusCode::kUnimplemented);
}

// A head_dim other than hidden / heads is written as llama.cpp reads it (attention.key_length and
// value_length; it takes n_embd / n_head where they are absent), besides the rotation's width.
TEST(ModelConfigTest, GgufWritesTheHeadDimAsKeyAndValueLength) {
  ModelConfig want = SmallConfig();
  want.head_dim = 32;  // hidden 64 over 4 heads would be 16
  GgufWriter w;
  AddLlamaMetadata(want, &w);
  auto file = GgufFile::Open(WriteTempFile("head_dim.gguf", *w.Serialize()));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetInt("llama.attention.key_length"), 32);
  EXPECT_EQ(*(*file)->GetInt("llama.attention.value_length"), 32);
  EXPECT_EQ(*(*file)->GetInt("llama.rope.dimension_count"), 32);
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 32);
}

TEST(ModelConfigTest, GgufLlama3RopeFreqsAreRecognised) {
  ModelConfig want = SmallConfig();
  want.rope_theta = 500000.0f;
  want.rope_scaling = Llama3RopeScaling{32.0f, 1.0f, 4.0f, 8192};
  GgufWriter w;
  AddLlamaMetadata(want, &w);
  std::vector<float> factors;
  for (double f : Llama3RopeFreqFactors(*want.rope_scaling, 16, 500000.0)) {
    factors.push_back(static_cast<float>(f));
  }
  ASSERT_TRUE(w.AddTensor("rope_freqs.weight", {8}, GgmlType::kF32, factors).ok());
  auto c = ConfigOf(w);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 32.0f);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  // Factors no Llama-3 scaling produces are rejected rather than misread.
  GgufWriter bad;
  AddLlamaMetadata(want, &bad);
  factors[0] = 3.0f;
  ASSERT_TRUE(bad.AddTensor("rope_freqs.weight", {8}, GgmlType::kF32, factors).ok());
  EXPECT_EQ(ConfigOf(bad).status().code(), absl::StatusCode::kUnimplemented);
}

// Reals past float's range, infinite or NaN are refused naming the key (a cast would be
// undefined behaviour and give inf).
TEST(ModelConfigTest, GgufRealsMustBeFiniteFloats) {
  for (double bad : {1e39, std::numeric_limits<double>::infinity()}) {
    GgufWriter theta = LlamaMetadata();
    theta.AddUint32("llama.vocab_size", 10);
    theta.AddFloat64("llama.rope.freq_base", bad);
    auto c = ConfigOf(theta);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(c.status().message(), "'llama.rope.freq_base'")) << c.status();
  }
  GgufWriter eps = LlamaMetadata("llama.attention.layer_norm_rms_epsilon");
  eps.AddUint32("llama.vocab_size", 10);
  eps.AddFloat32("llama.attention.layer_norm_rms_epsilon",
                 std::numeric_limits<float>::infinity());
  auto c = ConfigOf(eps);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "layer_norm_rms_epsilon")) << c.status();
}

// Linear scaling (a factor with no scaling type, as older converters wrote it) is refused naming
// the key, not run unscaled; a factor of 1 is no scaling.
TEST(ModelConfigTest, GgufLinearRopeScalingIsRefusedByName) {
  for (const std::string key : {"llama.rope.scale_linear", "llama.rope.scaling.factor"}) {
    GgufWriter w = LlamaMetadata();
    w.AddUint32("llama.vocab_size", 10);
    w.AddFloat32(key, 4.0f);
    auto c = ConfigOf(w);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << key;
    EXPECT_TRUE(absl::StrContains(c.status().message(), key)) << c.status();
    GgufWriter one = LlamaMetadata();
    one.AddUint32("llama.vocab_size", 10);
    one.AddFloat32(key, 1.0f);
    EXPECT_TRUE(ConfigOf(one).ok()) << key;
  }
}

// Partial rotary embeddings or a value width apart from the key width are refused naming the
// keys, not read as a different head_dim (which failed later on a tensor's shape).
TEST(ModelConfigTest, GgufWidthsOtherThanTheHeadDimAreRefusedByName) {
  for (const std::string key : {"llama.rope.dimension_count", "llama.attention.value_length"}) {
    GgufWriter w = LlamaMetadata();
    w.AddUint32("llama.vocab_size", 10);
    w.AddUint32("llama.attention.key_length", 16);
    w.AddUint32(key, 8);
    auto c = ConfigOf(w);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << key;
    EXPECT_TRUE(absl::StrContains(c.status().message(), key + " = 8 differs from the head "
                                                         "dimension 16"))
        << c.status();
  }
}

// rope_freqs.weight's shape is checked before its values are read.
TEST(ModelConfigTest, GgufRopeFreqsOfTheWrongShapeAreRefused) {
  ModelConfig want = SmallConfig();
  GgufWriter w;
  AddLlamaMetadata(want, &w);
  ASSERT_TRUE(w.AddTensor("rope_freqs.weight", {4, 2}, GgmlType::kF32,
                          std::vector<float>(8, 1.0f)).ok());
  auto c = ConfigOf(w);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "rope_freqs.weight has dims [4, 2]"))
      << c.status();
}

constexpr const char* kLlama32Json = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 2048,
  "intermediate_size": 8192,
  "num_hidden_layers": 16,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 64,
  "max_position_embeddings": 131072,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
})";

TEST(ModelConfigTest, HfConfigJsonLlama32) {
  auto c = ModelConfig::FromHfConfigJson(kLlama32Json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->num_layers, 16);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->rope_theta, 500000.0f);
  EXPECT_TRUE(c->tie_word_embeddings);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 32.0f);
  EXPECT_EQ(c->rope_scaling->low_freq_factor, 1.0f);
  EXPECT_EQ(c->rope_scaling->high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
}

TEST(ModelConfigTest, HfConfigJsonDefaultsAndLegacyTypeKey) {
  auto c = ModelConfig::FromHfConfigJson(R"({
    "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
    "num_hidden_layers": 30, "num_attention_heads": 9, "max_position_embeddings": 8192,
    "vocab_size": 49152, "rope_scaling": null})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 9);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->rope_scaling.has_value());
  // Named by architectures alone (no model_type).
  auto legacy = ModelConfig::FromHfConfigJson(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
    "vocab_size": 10, "rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1,
                     "high_freq_factor": 4, "original_max_position_embeddings": 8192}})");
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->rope_scaling->factor, 8.0f);
}

TEST(ModelConfigTest, HfConfigJsonErrorsNameTheKey) {
  struct Case {
    std::string json;
    std::string key;
  } cases[] = {
      {R"({"model_type": "llama", "hidden_size": 64})", "vocab_size"},
      {R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 64})", "intermediate_size"},
      {R"({"model_type": "llama", "vocab_size": 10, "hidden_size": "64",
           "intermediate_size": 1})", "hidden_size"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "rope_scaling": {"rope_type": "llama3", "factor": 8}})",
       "rope_scaling.low_freq_factor"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "rope_scaling": {"rope_type": "yarn", "factor": 8}})",
       "yarn"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3,
           "max_position_embeddings": 64, "vocab_size": 10})",
       "num_kv_heads"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "attention_bias": true})",
       "'attention_bias' true is not supported"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "mlp_bias": true})",
       "'mlp_bias' true is not supported"},
      {R"({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "sliding_window": 32})",
       "'sliding_window' 32 is not supported"},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64,
           "vocab_size": 10, "rope_theta": 1e39})",
       "'rope_theta' = 1e+39 is not a finite 32-bit float"},
      {R"({"model_type": "gpt2"})", "gpt2"},
      // Neither model_type nor architectures: not read as Llama by default.
      {R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "max_position_embeddings": 64, "vocab_size": 10})",
       "neither 'model_type' nor 'architectures'"},
      {R"({"model_type": 7, "hidden_size": 64})", "'model_type' must be a string"},
      {R"({"architectures": ["GPT2LMHeadModel"]})", "GPT2LMHeadModel"},
      {R"([1, 2])", "object"},
      {R"({"hidden_size": )", "JSON"},
  };
  for (const Case& c : cases) {
    auto r = ModelConfig::FromHfConfigJson(c.json);
    EXPECT_FALSE(r.ok()) << c.json;
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.key)) << r.status();
  }
  // Off, absent or covering the whole context: accepted.
  auto ok = ModelConfig::FromHfConfigJson(R"({"model_type": "mistral", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
      "max_position_embeddings": 64, "vocab_size": 10, "attention_bias": false,
      "mlp_bias": false, "sliding_window": null})");
  EXPECT_TRUE(ok.ok()) << ok.status();
  ok = ModelConfig::FromHfConfigJson(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
      "max_position_embeddings": 64, "vocab_size": 10, "sliding_window": 64})");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
// transformers v5 saves RoPE as rope_parameters (rope_theta and the scaling together, neither
// at the top level): it loaded with theta 10000 and no scaling.
TEST(ModelConfigTest, HfRopeParametersOfTransformersFiveAreRead) {
  auto c = ModelConfig::FromHfConfigJson(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "max_position_embeddings": 131072, "vocab_size": 10,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_theta, 500000.0f);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 8.0f);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  auto plain = ModelConfig::FromHfConfigJson(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "max_position_embeddings": 64, "vocab_size": 10,
    "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->rope_theta, 100000.0f);
  EXPECT_FALSE(plain->rope_scaling.has_value());
  auto yarn = ModelConfig::FromHfConfigJson(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "max_position_embeddings": 64, "vocab_size": 10,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}})");
  EXPECT_EQ(yarn.status().code(), absl::StatusCode::kUnimplemented) << yarn.status();
  EXPECT_NE(yarn.status().message().find("rope_parameters.rope_type 'yarn'"),
            std::string::npos) << yarn.status();
}

// The MLP is SwiGLU: a config naming another activation loaded and ran SiLU.
TEST(ModelConfigTest, HfHiddenActOtherThanSiluIsRefusedByName) {
  const std::string head = R"({"model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
    "max_position_embeddings": 64, "vocab_size": 10, "hidden_act": )";
  for (const char* act : {R"("silu")", R"("swish")"}) {
    EXPECT_TRUE(ModelConfig::FromHfConfigJson(head + act + "}").ok()) << act;
  }
  auto gelu = ModelConfig::FromHfConfigJson(head + R"("gelu"})");
  EXPECT_EQ(gelu.status().code(), absl::StatusCode::kUnimplemented) << gelu.status();
  EXPECT_NE(gelu.status().message().find("hidden_act 'gelu'"), std::string::npos)
      << gelu.status();
}

// A config nested 100,000 levels deep (in a key the config reader never looks at; the loader's
// eos_token_id reader copied it) crashed the loader with a stack overflow.
TEST(ModelConfigTest, HfConfigNestedTooDeepIsRefusedNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto c = ModelConfig::FromHfConfigJson(R"({"model_type": "llama", "eos_token_id": )" + deep +
                                         "}");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_NE(c.status().message().find("config.json: JSON nested deeper than 64 levels"),
            std::string::npos) << c.status();
}

TEST(JsonNestingTest, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(JsonNestingDepth("1"), 0u);
  EXPECT_EQ(JsonNestingDepth("[]"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": [[]]}]})"), 5u);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[{{{", "b": "\"[[["})"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"(["\\", [1]])"), 2u);  // an escaped backslash ends before "
  EXPECT_TRUE(CheckJsonNesting(std::string(64, '['), "x").ok());
  EXPECT_EQ(CheckJsonNesting(std::string(65, '['), "x").message(),
            "x: JSON nested deeper than 64 levels");
}

}  // namespace rtgen
