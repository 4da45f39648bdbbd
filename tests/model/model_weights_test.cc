#include "engine/model/model_weights.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/model/ggml_dequant.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model_writer.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/rope_permute.h"
#include "engine/model/synthetic_model.h"
#include "gtest/gtest.h"
#include "tests/model/test_files.h"

namespace rtgen {
namespace {

using ::rtgen::testing::kSmolLm2Path;
using ::rtgen::testing::WriteTempFile;

TEST(RopePermuteTest, HandBuiltTensor) {
  // 2 heads of head_dim 4, one column holding the HF row index.
  Matrix hf{8, 1, {0, 1, 2, 3, 4, 5, 6, 7}, {}};
  Matrix gguf = hf;
  ASSERT_TRUE(PermuteHfQk(2, 4, &gguf).ok());
  // GGUF row 2i + j holds HF row j*2 + i: rows (0,2,1,3) per head.
  EXPECT_EQ(gguf.data, (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  ASSERT_TRUE(UnpermuteGgufQk(2, 4, &gguf).ok());
  EXPECT_EQ(gguf.data, hf.data);
  // head_dim 6, 2 columns: GGUF rows are HF rows (0,3,1,4,2,5).
  Matrix g6{6, 2, {0, 10, 3, 13, 1, 11, 4, 14, 2, 12, 5, 15}, {}};
  ASSERT_TRUE(UnpermuteGgufQk(1, 6, &g6).ok());
  EXPECT_EQ(g6.data, (std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}));
  Matrix bad{5, 1, {0, 1, 2, 3, 4}, {}};
  EXPECT_FALSE(UnpermuteGgufQk(1, 4, &bad).ok());
}

ModelConfig TinyConfig(bool tied) {
  ModelConfig c;
  c.vocab_size = 40;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = tied;
  return c;
}

Matrix RandomMatrix(uint64_t seed, const std::string& name, int64_t rows, int64_t cols) {
  return Matrix{rows, cols, SyntheticTensor(seed, name, rows * cols, false), {}};
}

ModelWeights RandomWeights(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                kv = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
  ModelWeights w;
  w.token_embedding = RandomMatrix(1, "emb", c.vocab_size, h);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = std::to_string(i);
    LayerWeights l;
    l.attn_norm = SyntheticTensor(2, p + "an", h, true);
    l.wq = RandomMatrix(3, p + "q", q, h);
    l.wk = RandomMatrix(4, p + "k", kv, h);
    l.wv = RandomMatrix(5, p + "v", kv, h);
    l.wo = RandomMatrix(6, p + "o", h, q);
    l.ffn_norm = SyntheticTensor(7, p + "fn", h, true);
    l.w_gate = RandomMatrix(8, p + "g", f, h);
    l.w_up = RandomMatrix(9, p + "u", f, h);
    l.w_down = RandomMatrix(10, p + "d", h, f);
    w.layers.push_back(std::move(l));
  }
  w.final_norm = SyntheticTensor(11, "final", h, true);
  if (!c.tie_word_embeddings) w.lm_head = RandomMatrix(12, "head", c.vocab_size, h);
  return w;
}

TEST(ModelWeightsTest, CheckShapesNamesTheTensor) {
  const ModelConfig c = TinyConfig(false);
  ModelWeights w = RandomWeights(c);
  EXPECT_TRUE(w.CheckShapes(c).ok());
  w.layers[1].wk.rows = 16;
  EXPECT_TRUE(absl::StrContains(w.CheckShapes(c).message(), "layers[1].wk"));
  ModelWeights tied = RandomWeights(TinyConfig(true));
  EXPECT_TRUE(tied.CheckShapes(TinyConfig(true)).ok());
  EXPECT_TRUE(absl::StrContains(tied.CheckShapes(c).message(), "lm_head"));
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << what << "[" << i << "]";
}

// A matrix stored in a block format keeps its blocks, and they dequantise to exactly the fp32
// data the loader produced: rows in the same order, also after the q/k un-permutation.
void ExpectBlocksMatchData(const Matrix& m, BlockFormat want, const std::string& what) {
  ASSERT_EQ(m.quantized.format, want) << what;
  if (want == BlockFormat::kNone) {
    EXPECT_TRUE(m.quantized.bytes.empty()) << what;
    return;
  }
  std::vector<float> back(m.data.size());
  const int64_t n_blocks = static_cast<int64_t>(m.data.size()) / kGgmlBlockSize;
  switch (want) {
    case BlockFormat::kQ8_0:
      DequantizeQ8_0(m.quantized.bytes.data(), n_blocks, back.data());
      break;
    case BlockFormat::kQ4_0:
      DequantizeQ4_0(m.quantized.bytes.data(), n_blocks, back.data());
      break;
    default:
      DequantizeQ4_1(m.quantized.bytes.data(), n_blocks, back.data());
      break;
  }
  ASSERT_EQ(back, m.data) << what;
}

// Every dtype through the writer and back: names, layout and the q/k permutation line up; matrices
// stored in a block format keep their blocks.
TEST(ModelWeightsTest, GgufRoundTripEveryDtype) {
  const ModelConfig c = TinyConfig(false);
  const ModelWeights w = RandomWeights(c);
  // Worst-case element error for N(0, 0.02) weights (|x| < 0.12 here): see ggml_quant.h.
  const struct {
    GgmlType type;
    float tol;
    BlockFormat blocks;  // what the loader keeps
  } cases[] = {{GgmlType::kF32, 0.0f, BlockFormat::kNone},
               {GgmlType::kF16, 1e-4f, BlockFormat::kNone},
               {GgmlType::kBF16, 1e-3f, BlockFormat::kNone},
               {GgmlType::kQ8_0, 1e-3f, BlockFormat::kQ8_0},
               {GgmlType::kQ4_0, 0.02f, BlockFormat::kQ4_0},
               {GgmlType::kQ4_1, 0.01f, BlockFormat::kQ4_1}};
  for (const auto& tc : cases) {
    GgufWriter writer;
    AddLlamaMetadata(c, &writer);
    ASSERT_TRUE(AddLlamaWeights(c, w, tc.type, &writer).ok());
    auto file = GgufFile::Open(WriteTempFile("w.gguf", *writer.Serialize()));
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ModelConfig::FromGguf(**file);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_FALSE(config->tie_word_embeddings);
    auto got = LoadGgufWeights(**file, *config);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string t = std::to_string(static_cast<int>(tc.type));
    EXPECT_EQ((*file)->FindTensor("blk.0.attn_q.weight")->type, static_cast<uint32_t>(tc.type));
    ExpectNear(got->token_embedding.data, w.token_embedding.data, tc.tol, t + " embedding");
    ExpectNear(got->lm_head.data, w.lm_head.data, tc.tol, t + " lm_head");
    ExpectNear(got->final_norm, w.final_norm, 0.0f, t + " final_norm");  // norms stay F32
    for (int i = 0; i < c.num_layers; ++i) {
      const LayerWeights& a = got->layers[i];
      const LayerWeights& b = w.layers[i];
      ExpectNear(a.attn_norm, b.attn_norm, 0.0f, t + " attn_norm");
      ExpectNear(a.wq.data, b.wq.data, tc.tol, t + " wq");
      ExpectNear(a.wk.data, b.wk.data, tc.tol, t + " wk");
      ExpectNear(a.wv.data, b.wv.data, tc.tol, t + " wv");
      ExpectNear(a.wo.data, b.wo.data, tc.tol, t + " wo");
      ExpectNear(a.w_gate.data, b.w_gate.data, tc.tol, t + " w_gate");
      ExpectNear(a.w_up.data, b.w_up.data, tc.tol, t + " w_up");
      ExpectNear(a.w_down.data, b.w_down.data, tc.tol, t + " w_down");
      for (const Matrix* m : {&a.wq, &a.wk, &a.wv, &a.wo, &a.w_gate, &a.w_up, &a.w_down}) {
        ExpectBlocksMatchData(*m, tc.blocks, t + " layer matrix");
      }
    }
    ExpectBlocksMatchData(got->token_embedding, tc.blocks, t + " embedding");
    ExpectBlocksMatchData(got->lm_head, tc.blocks, t + " lm_head");
    if (tc.blocks != BlockFormat::kNone) {  // wrong block byte counts are refused, named
      ModelWeights broken = *got;
      broken.layers[1].wv.quantized.bytes.pop_back();
      EXPECT_TRUE(absl::StrContains(broken.CheckShapes(c).message(), "layers[1].wv")) << t;
    }
  }
}

// The bytes of a GGUF file of `c` with random F32 weights, and `extra` tensors added after them.
std::string TinyModelGguf(const ModelConfig& c,
                          const std::function<void(GgufWriter&)>& extra = nullptr) {
  GgufWriter w;
  AddLlamaMetadata(c, &w);
  const ModelWeights weights = RandomWeights(c);  // read by Serialize, below
  EXPECT_TRUE(AddLlamaWeights(c, weights, GgmlType::kF32, &w).ok());
  if (extra) extra(w);
  return *w.Serialize();
}

TEST(ModelWeightsTest, GgufMissingOrMisshapenTensorIsNamed) {
  const ModelConfig c = TinyConfig(true);
  auto file = GgufFile::Open(WriteTempFile("w.gguf", TinyModelGguf(c)));
  ASSERT_TRUE(file.ok());
  ModelConfig more_layers = c;
  more_layers.num_layers = 3;
  auto r = LoadGgufWeights(**file, more_layers);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "blk.2.attn_norm.weight")) << r.status();
  // A corrupt layer count: refused at the first missing layer, not by exhausting memory first.
  more_layers.num_layers = 2'000'000'000;
  r = LoadGgufWeights(**file, more_layers);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "blk.2.attn_norm.weight")) << r.status();
  ModelConfig wider = c;
  wider.intermediate_size = 128;
  r = LoadGgufWeights(**file, wider);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "blk.0.ffn_gate.weight")) << r.status();
  ModelConfig untied = c;
  untied.tie_word_embeddings = false;
  r = LoadGgufWeights(**file, untied);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "output.weight")) << r.status();
  // Fewer layers than the file holds (a wrong llama.block_count): the first unread one named.
  ModelConfig fewer_layers = c;
  fewer_layers.num_layers = 1;
  r = LoadGgufWeights(**file, fewer_layers);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "tensor 'blk.1.")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "1-layer Llama model")) << r.status();
}

TEST(ModelWeightsTest, GgufBiasTensorsAreRefusedByName) {
  // The forward passes have no bias terms: a file with any must not load with them left out.
  const ModelConfig c = TinyConfig(true);
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  auto file = GgufFile::Open(WriteTempFile("bias.gguf", TinyModelGguf(c, [&](GgufWriter& w) {
    EXPECT_TRUE(w.AddTensor("blk.0.attn_q.bias", {q_dim}, GgmlType::kF32,
                            std::vector<float>(q_dim, 0.5f))
                    .ok());
  })));
  ASSERT_TRUE(file.ok()) << file.status();
  auto r = LoadGgufWeights(**file, c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "blk.0.attn_q.bias")) << r.status();
}

// A file with tensors the model does not read is refused naming one, not loaded without it: a
// tensor of another architecture, a layer index written with a leading zero (layers past the
// layer count: GgufMissingOrMisshapenTensorIsNamed).
TEST(ModelWeightsTest, GgufTensorsTheModelDoesNotReadAreRefusedByName) {
  const ModelConfig c = TinyConfig(true);
  for (const std::string name : {"blk.0.ffn_gate_inp.weight", "blk.00.attn_q.weight",
                                 "pos_embd.weight"}) {
    auto extra = GgufFile::Open(WriteTempFile("extra.gguf", TinyModelGguf(c, [&](GgufWriter& w) {
      EXPECT_TRUE(w.AddTensor(name, {4}, GgmlType::kF32, std::vector<float>(4, 0.5f)).ok());
    })));
    ASSERT_TRUE(extra.ok()) << extra.status();
    auto r = LoadGgufWeights(**extra, c);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "'" + name + "'")) << r.status();
  }
}

// Un-permuted q/k of the real file equal what transformers' GGUF loader produces; these
// values were read from transformers (AutoModelForCausalLM.from_pretrained(gguf_file=...))
// model.layers[0].self_attn.{q,k}_proj.weight, rows 1/32/97 (q) and 33/190 (k), columns 0..2.
TEST(ModelWeightsTest, RealSmolLm2MatchesTransformersLayout) {
  auto file = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  auto w = LoadGgufWeights(**file, *c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->lm_head.empty());
  EXPECT_EQ(w->layers.size(), 30u);
  const Matrix& q = w->layers[0].wq;
  const Matrix& k = w->layers[0].wk;
  ASSERT_EQ(q.rows, 576);
  ASSERT_EQ(k.rows, 192);
  const struct {
    const Matrix* m;
    int row;
    float v[3];
  } golden[] = {
      {&q, 1, {-0.1591796875f, 0.39794921875f, -0.0198974609375f}},
      {&q, 32, {-0.1173095703125f, -0.1173095703125f, -0.19281005859375f}},
      {&q, 97, {-0.0048828125f, 0.0477294921875f, -0.0574951171875f}},
      {&k, 33, {-0.09912109375f, 0.22955322265625f, -0.2305908203125f}},
      {&k, 190, {-0.1663818359375f, 0.271240234375f, -0.312255859375f}},
  };
  for (const auto& g : golden) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(g.m->row(g.row)[j], g.v[j], 1e-6f) << "row " << g.row << " col " << j;
    }
  }
}

}  // namespace
}  // namespace rtgen
