#include "engine/model/safetensors_file.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/model_weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/model/safetensors_builder.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::SafetensorsBuilder;
using ::rtgen::testing::UniqueTempPath;
using ::rtgen::testing::WriteTempFile;

TEST(SafetensorsTest, RoundTripF32F16Bf16) {
  SafetensorsBuilder b;
  b.header()["__metadata__"] = {{"format", "pt"}};
  b.Add("a", "F32", {2, 3}, {1, -2, 3.5f, 0, 1e-8f, 7});
  b.Add("h", "F16", {4}, {0.5f, -0.25f, 1024, 65504});
  b.Add("bf", "BF16", {2}, {1.5f, -3});
  auto f = SafetensorsFile::Open(WriteTempFile("a.safetensors", b.Bytes()));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors().size(), 3u);
  const SafetensorsTensor* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*(*f)->ReadF32(*a), (std::vector<float>{1, -2, 3.5f, 0, 1e-8f, 7}));
  EXPECT_EQ(*(*f)->ReadF32(*(*f)->Find("h")), (std::vector<float>{0.5f, -0.25f, 1024, 65504}));
  EXPECT_EQ(*(*f)->ReadF32(*(*f)->Find("bf")), (std::vector<float>{1.5f, -3}));
  EXPECT_EQ((*f)->Find("__metadata__"), nullptr);
}

TEST(SafetensorsTest, CorruptHeaders) {
  auto open = [](const std::string& bytes) {
    return SafetensorsFile::Open(WriteTempFile("bad.safetensors", bytes)).status();
  };
  EXPECT_FALSE(open("").ok());
  EXPECT_FALSE(open("1234").ok());
  SafetensorsBuilder good;
  good.Add("x", "F32", {2}, {1, 2});
  const std::string bytes = good.Bytes();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    ASSERT_FALSE(open(bytes.substr(0, cut)).ok()) << "cut at " << cut;
  }
  std::string huge = bytes;
  huge[7] = 0x10;  // header length 2^60
  EXPECT_FALSE(open(huge).ok());
  EXPECT_TRUE(absl::StrContains(open(std::string("\x05\0\0\0\0\0\0\0{abc}", 13)).message(),
                                "JSON"));

  struct Case {
    const char* what;
    nlohmann::json entry;
    std::string expect;
  } cases[] = {
      {"unknown dtype", {{"dtype", "Q4"}, {"shape", {2}}, {"data_offsets", {0, 8}}}, "dtype"},
      {"size mismatch", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}, "need"},
      {"past the end", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}, "outside"},
      {"reversed", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 4}}}, "outside"},
      {"negative dim", {{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}}, "dim"},
      {"no offsets", {{"dtype", "F32"}, {"shape", {2}}}, "data_offsets"},
      {"not an object", 5, "not an object"},
  };
  for (const Case& c : cases) {
    SafetensorsBuilder b;
    b.Add("x", "F32", {2}, {1, 2});
    b.header()["y"] = c.entry;
    const absl::Status s = open(b.Bytes());
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_TRUE(absl::StrContains(s.message(), c.expect)) << c.what << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "'y'")) << c.what << ": " << s;
  }
  // A repeated name: the JSON parser keeps the last entry, so the check sees the raw keys.
  const std::string entry = R"({"dtype":"F32","shape":[2],"data_offsets":)";
  const std::string twice =
      "{\"w\":" + entry + "[0,8]},\"w\":" + entry + "[8,16]}}";
  const uint64_t twice_len = twice.size();
  const absl::Status dup = open(std::string(reinterpret_cast<const char*>(&twice_len), 8) +
                                twice + std::string(16, '\0'));
  EXPECT_TRUE(absl::StrContains(dup.message(), "duplicate tensor 'w'")) << dup;
  SafetensorsBuilder overlap;
  overlap.Add("x", "F32", {2}, {1, 2});
  overlap.header()["y"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 8}}};
  EXPECT_TRUE(absl::StrContains(open(overlap.Bytes()).message(), "overlap"));
}

TEST(SafetensorsTest, UnsupportedDtypeReadIsUnimplemented) {
  SafetensorsBuilder b;
  b.Add("x", "F32", {2}, {1, 2});
  b.header()["x"]["dtype"] = "I32";
  auto f = SafetensorsFile::Open(WriteTempFile("i32.safetensors", b.Bytes()));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->ReadF32(*(*f)->Find("x")).status().code(), absl::StatusCode::kUnimplemented);
}

ModelConfig TinyConfig() {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.max_position_embeddings = 32;
  return c;
}

// Values that identify the tensor and the element: tensor id * 1000 + index.
std::vector<float> Tagged(int id, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(id * 1000 + i);
  return v;
}

TEST(SafetensorsTest, ShardedDirectoryLoadsHfNames) {
  const ModelConfig c = TinyConfig();
  const std::string dir = UniqueTempPath("sharded");
  std::filesystem::create_directories(dir);
  SafetensorsBuilder s1, s2;
  s1.Add("model.embed_tokens.weight", "F32", {10, 8}, Tagged(1, 80));
  s1.Add("model.norm.weight", "BF16", {8}, Tagged(0, 8));
  s2.Add("lm_head.weight", "F32", {10, 8}, Tagged(2, 80));
  for (int i = 0; i < 2; ++i) {
    SafetensorsBuilder& s = i == 0 ? s1 : s2;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int id = 10 * (i + 1);
    s.Add(p + "input_layernorm.weight", "F32", {8}, Tagged(id + 0, 8));
    s.Add(p + "self_attn.q_proj.weight", "F32", {8, 8}, Tagged(id + 1, 64));
    s.Add(p + "self_attn.k_proj.weight", "F16", {4, 8}, Tagged(0, 32));
    s.Add(p + "self_attn.v_proj.weight", "F32", {4, 8}, Tagged(id + 3, 32));
    s.Add(p + "self_attn.o_proj.weight", "F32", {8, 8}, Tagged(id + 4, 64));
    s.Add(p + "post_attention_layernorm.weight", "F32", {8}, Tagged(id + 5, 8));
    s.Add(p + "mlp.gate_proj.weight", "F32", {12, 8}, Tagged(id + 6, 96));
    s.Add(p + "mlp.up_proj.weight", "F32", {12, 8}, Tagged(id + 7, 96));
    s.Add(p + "mlp.down_proj.weight", "F32", {8, 12}, Tagged(id + 8, 96));
  }
  {
    std::ofstream(dir + "/model-00001-of-00002.safetensors", std::ios::binary) << s1.Bytes();
    std::ofstream(dir + "/model-00002-of-00002.safetensors", std::ios::binary) << s2.Bytes();
    std::ofstream(dir + "/config.json") << "{}";
  }
  auto w = LoadSafetensorsWeights(dir, c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->token_embedding.data, Tagged(1, 80));
  EXPECT_EQ(w->lm_head.data, Tagged(2, 80));
  EXPECT_EQ(w->final_norm, Tagged(0, 8));
  EXPECT_EQ(w->layers[1].wq.data, Tagged(21, 64));
  EXPECT_EQ(w->layers[1].w_down.data, Tagged(28, 96));
  EXPECT_EQ(w->layers[1].w_down.rows, 8);
  EXPECT_EQ(w->layers[1].w_down.cols, 12);
  EXPECT_EQ(w->layers[0].ffn_norm, Tagged(15, 8));
  EXPECT_EQ(w->layers[0].wk.data, Tagged(0, 32));

  ModelConfig wider = c;
  wider.intermediate_size = 16;
  auto bad = LoadSafetensorsWeights(dir, wider);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "model.layers.0.mlp.gate_proj.weight"))
      << bad.status();
  ModelConfig deeper = c;
  deeper.num_layers = 3;
  bad = LoadSafetensorsWeights(dir, deeper);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "model.layers.2.")) << bad.status();
  deeper.num_layers = 2'000'000'000;  // corrupt: refused at layer 2, not by exhausting memory
  bad = LoadSafetensorsWeights(dir, deeper);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "model.layers.2.")) << bad.status();
  EXPECT_EQ(LoadSafetensorsWeights(UniqueTempPath("missing"), c).status().code(),
            absl::StatusCode::kNotFound);

  // Tensors the model does not read are refused naming one: layers past num_hidden_layers.
  ModelConfig shallower = c;
  shallower.num_layers = 1;
  bad = LoadSafetensorsWeights(dir, shallower);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "tensor 'model.layers.1.")) << bad.status();
}

// A whole one-layer tiny model (TinyConfig's shapes) in one file's builder.
SafetensorsBuilder OneLayerModel(bool tied) {
  SafetensorsBuilder s;
  s.Add("model.embed_tokens.weight", "F32", {10, 8}, Tagged(1, 80));
  s.Add("model.norm.weight", "F32", {8}, Tagged(0, 8));
  if (!tied) s.Add("lm_head.weight", "F32", {10, 8}, Tagged(2, 80));
  const std::string p = "model.layers.0.";
  s.Add(p + "input_layernorm.weight", "F32", {8}, Tagged(3, 8));
  s.Add(p + "self_attn.q_proj.weight", "F32", {8, 8}, Tagged(4, 64));
  s.Add(p + "self_attn.k_proj.weight", "F32", {4, 8}, Tagged(5, 32));
  s.Add(p + "self_attn.v_proj.weight", "F32", {4, 8}, Tagged(6, 32));
  s.Add(p + "self_attn.o_proj.weight", "F32", {8, 8}, Tagged(7, 64));
  s.Add(p + "post_attention_layernorm.weight", "F32", {8}, Tagged(8, 8));
  s.Add(p + "mlp.gate_proj.weight", "F32", {12, 8}, Tagged(9, 96));
  s.Add(p + "mlp.up_proj.weight", "F32", {12, 8}, Tagged(10, 96));
  s.Add(p + "mlp.down_proj.weight", "F32", {8, 12}, Tagged(11, 96));
  return s;
}

ModelConfig OneLayerConfig(bool tied) {
  ModelConfig c = TinyConfig();
  c.num_layers = 1;
  c.tie_word_embeddings = tied;
  return c;
}

// One more tensor beside a whole tiny model in a single file: refused by name unless the model
// reads it or it is one a checkpoint may keep (rotary inverse frequencies; lm_head beside tied
// embeddings).
absl::Status LoadWithExtraTensor(const std::string& name, bool tied) {
  const std::string dir = UniqueTempPath("extra");
  std::filesystem::create_directories(dir);
  SafetensorsBuilder s = OneLayerModel(tied);
  if (!name.empty()) s.Add(name, "F32", {8}, Tagged(12, 8));
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << s.Bytes();
  return LoadSafetensorsWeights(dir, OneLayerConfig(tied)).status();
}

// Mistral's downloads hold consolidated.safetensors (the same weights in Mistral's own names)
// beside the Hugging Face shards: the shards are the index's, or every file but consolidated*.
TEST(SafetensorsTest, AConsolidatedFileBesideTheShardsIsNotRead) {
  SafetensorsBuilder mistral_names;
  mistral_names.Add("layers.0.attention.wk.weight", "F32", {4, 8}, Tagged(5, 32));
  mistral_names.Add("tok_embeddings.weight", "F32", {10, 8}, Tagged(1, 80));
  for (bool with_index : {false, true}) {
    SCOPED_TRACE(with_index ? "with model.safetensors.index.json" : "without an index");
    const std::string dir = UniqueTempPath("mistral");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/model-00001-of-00001.safetensors", std::ios::binary)
        << OneLayerModel(false).Bytes();
    std::ofstream(dir + "/consolidated.safetensors", std::ios::binary) << mistral_names.Bytes();
    if (with_index) {
      std::ofstream(dir + "/model.safetensors.index.json")
          << R"({"metadata": {}, "weight_map": {"model.norm.weight": )"
             R"("model-00001-of-00001.safetensors"}})";
    }
    auto w = LoadSafetensorsWeights(dir, OneLayerConfig(false));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->token_embedding.data, Tagged(1, 80));
  }
  // model.safetensors alone, without an index: a PEFT adapter beside it is not read.
  {
    const std::string adapter_dir = UniqueTempPath("adapter");
    std::filesystem::create_directories(adapter_dir);
    std::ofstream(adapter_dir + "/model.safetensors", std::ios::binary)
        << OneLayerModel(false).Bytes();
    SafetensorsBuilder adapter;
    adapter.Add("base_model.model.lm_head.lora_A.weight", "F32", {8}, Tagged(3, 8));
    std::ofstream(adapter_dir + "/adapter_model.safetensors", std::ios::binary) << adapter.Bytes();
    EXPECT_TRUE(LoadSafetensorsWeights(adapter_dir, OneLayerConfig(false)).ok());
  }
  // An index naming a shard that is not there is an error naming both.
  const std::string dir = UniqueTempPath("bad_index");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << OneLayerModel(false).Bytes();
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}})";
  const absl::Status s = LoadSafetensorsWeights(dir, OneLayerConfig(false)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "names model-00002-of-00002.safetensors")) << s;
}

TEST(SafetensorsTest, TensorsTheModelDoesNotReadAreRefusedByName) {
  EXPECT_TRUE(LoadWithExtraTensor("", false).ok());
  EXPECT_TRUE(LoadWithExtraTensor("model.layers.0.self_attn.rotary_emb.inv_freq", false).ok());
  EXPECT_TRUE(LoadWithExtraTensor("lm_head.weight", true).ok());
  const absl::Status bias = LoadWithExtraTensor("model.layers.0.self_attn.q_proj.bias", false);
  EXPECT_EQ(bias.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(bias.message(), "model.layers.0.self_attn.q_proj.bias")) << bias;
  for (const std::string name : {"model.layers.0.mlp.experts.0.weight", "model.layers.1.x",
                                 "transformer.wte.weight"}) {
    const absl::Status s = LoadWithExtraTensor(name, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(s.message(), "tensor '" + name + "'")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "model.safetensors)")) << s;  // the file named
  }
}

}  // namespace
}  // namespace rtgen
