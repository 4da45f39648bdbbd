// The CPU backend against Hugging Face transformers on the real SmolLM2 weights: next-token
// logits within tolerance, identical tokenization of the prompts, and identical greedy
// continuations through the whole engine.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/synchronization/notification.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/loader/model_loader.h"
#include "tests/golden/golden_data.h"

namespace rtgen::testing {
namespace {

constexpr int kBlockSize = 16;

// One sequence, whole prompt in one step, blocks 0..n-1 in order.
StepInput PrefillStep(const std::vector<int32_t>& ids, const SamplingParams& params) {
  StepInput in;
  const int n = static_cast<int>(ids.size());
  const int blocks = (n + kBlockSize - 1) / kBlockSize;
  in.token_ids = ids;
  for (int i = 0; i < n; ++i) {
    in.positions.push_back(i);
    in.slot_mapping.push_back(i);
  }
  in.query_start = {0, n};
  in.context_lens = {n};
  in.max_blocks_per_seq = blocks;
  for (int b = 0; b < blocks; ++b) in.block_tables.push_back(b);
  SampleRequest sample;
  sample.seq_index = 0;
  sample.params = &params;
  in.samples.push_back(sample);
  return in;
}

struct Diff {
  double max_abs = 0;
  double rel_l2 = 0;
};

Diff Compare(const std::vector<float>& ours, const std::vector<float>& ref) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(ours[i]) - ref[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    num += e * e;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  d.rel_l2 = std::sqrt(num / den);
  return d;
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

class GoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new std::vector<GoldenCase>(ReadGoldenCases());
    auto model = LoadModel(kSmolLm2Path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new LoadedModel(*std::move(model));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete cases_;
  }
  // Every test, not only DataIsPresent: ReadGoldenCases gives no cases for a short file, and the
  // loops over them passed vacuously (ctest runs each test on its own).
  void SetUp() override { ASSERT_GE(cases_->size(), 5u) << "golden data missing or short"; }
  std::unique_ptr<CpuBackend> MakeBackend(WeightDtype dtype) {
    CpuBackendOptions options;
    options.weight_dtype = dtype;
    auto backend = CpuBackend::Create(model_->config, model_->weights, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    KvCacheShape shape;
    shape.num_blocks = 64;
    shape.block_size = kBlockSize;
    EXPECT_TRUE((*backend)->AllocateKvCache(shape).ok());
    return *std::move(backend);
  }
  static LoadedModel* model_;
  static std::vector<GoldenCase>* cases_;
};
LoadedModel* GoldenTest::model_ = nullptr;
std::vector<GoldenCase>* GoldenTest::cases_ = nullptr;

TEST_F(GoldenTest, DataIsPresent) { ASSERT_GE(cases_->size(), 5u); }

TEST_F(GoldenTest, PromptTokenizationMatchesTransformers) {
  for (const GoldenCase& c : *cases_) {
    auto ids = model_->tokenizer->Encode(c.prompt, /*parse_special=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c.prompt_ids) << c.prompt;
  }
}

// Next-token logits of every golden prompt with `dtype` weights against transformers': relative
// L2 error ≤ max_rel_l2, max abs error ≤ max_abs, and the same top token.
void ExpectLogitsClose(const std::vector<GoldenCase>& cases, CpuBackend& backend,
                       const char* label, double max_rel_l2, double max_abs) {
  SamplingParams greedy;
  greedy.temperature = 0;
  for (const GoldenCase& c : cases) {
    auto logits = backend.ComputeLogits(PrefillStep(c.prompt_ids, greedy));
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(logits->size(), c.logits.size());
    const Diff d = Compare(*logits, c.logits);
    EXPECT_LE(d.rel_l2, max_rel_l2) << label << ": " << c.prompt;
    EXPECT_LE(d.max_abs, max_abs) << label << ": " << c.prompt;
    EXPECT_EQ(Argmax(*logits), Argmax(c.logits)) << label << ": " << c.prompt;
    std::printf("[golden %s] case %zu rel_l2 %.2e max_abs %.2e\n", label,
                static_cast<size_t>(&c - cases.data()), d.rel_l2, d.max_abs);
  }
}

// fp32 weights: the same dequantised values as transformers, different summation order.
// Tolerance: relative L2 error of the logit vector ≤ 1e-5 and max abs error ≤ 5e-4 (logits are
// O(10); seen: ~2e-6 and ~4e-5); the top token is identical.
TEST_F(GoldenTest, F32LogitsMatchTransformers) {
  ExpectLogitsClose(*cases_, *MakeBackend(WeightDtype::kF32), "f32", 1e-5, 5e-4);
}

// bf16-stored weights: rounding every weight to 8 mantissa bits.
// Tolerance: relative L2 ≤ 2e-2 (max abs not bounded); the top token is identical.
TEST_F(GoldenTest, Bf16LogitsCloseToTransformers) {
  ExpectLogitsClose(*cases_, *MakeBackend(WeightDtype::kBf16), "bf16", 2e-2, 1e9);
}

// The serving default: the file's Q4_1/Q8_0 blocks (prefill widens them to fp32 row blocks).
// The weights are exactly transformers' dequantised ones, so the fp32 tolerances apply (seen:
// rel L2 ≤ 2.1e-6, max abs ≤ 4.4e-5).
TEST_F(GoldenTest, NativeBlockLogitsMatchTransformers) {
  ExpectLogitsClose(*cases_, *MakeBackend(WeightDtype::kNative), "native", 1e-5, 5e-4);
}

// Greedy continuations of every golden prompt through the whole engine (scheduler, paged KV,
// sampling) with `dtype` weights. With `max_num_seqs` 1 the prompts run one after another, so
// every decode step is a single token (the CPU backend's one-token matmul path); otherwise they
// are batched.
std::vector<std::vector<int32_t>> GreedyThroughEngine(const std::vector<GoldenCase>& cases,
                                                      std::unique_ptr<CpuBackend> backend,
                                                      const Tokenizer* tokenizer,
                                                      int32_t max_num_seqs) {
  EngineConfig config;
  config.max_model_len = 256;
  config.num_kv_blocks = 128;
  config.max_num_seqs = max_num_seqs;
  auto engine = Engine::Create(config, std::move(backend), tokenizer);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  struct Out {
    std::vector<int32_t> ids;
    absl::Notification done;
  };
  std::vector<std::unique_ptr<Out>> outs;
  for (size_t i = 0; i < cases.size(); ++i) {
    const GoldenCase& c = cases[i];
    Request r;
    r.id = "golden-" + std::to_string(i);
    r.prompt_tokens = c.prompt_ids;
    r.sampling.temperature = 0;
    r.stopping.max_tokens = static_cast<int32_t>(c.greedy_ids.size());
    r.stopping.ignore_eos = true;
    outs.push_back(std::make_unique<Out>());
    Out* out = outs.back().get();
    EXPECT_TRUE((*engine)
                    ->Submit(std::move(r),
                             [out](StreamChunk chunk) {
                               out->ids.insert(out->ids.end(), chunk.token_ids.begin(),
                                               chunk.token_ids.end());
                               if (chunk.finish != FinishReason::kNone) out->done.Notify();
                             })
                    .ok());
  }
  std::vector<std::vector<int32_t>> ids;
  for (auto& out : outs) {
    EXPECT_TRUE(out->done.WaitForNotificationWithTimeout(absl::Seconds(120)));
    ids.push_back(out->ids);
  }
  (*engine)->Shutdown();
  return ids;
}

// Greedy 32-token continuations, all prompts batched, fp32 weights: equal to transformers'
// generate(do_sample=False).
TEST_F(GoldenTest, F32GreedyContinuationsMatchTransformersThroughTheEngine) {
  const auto ids = GreedyThroughEngine(*cases_, MakeBackend(WeightDtype::kF32),
                                       model_->tokenizer.get(), /*max_num_seqs=*/64);
  ASSERT_EQ(ids.size(), cases_->size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i], (*cases_)[i].greedy_ids) << (*cases_)[i].prompt;
  }
}

// Decode steps multiply on the blocks: one prompt at a time (one token per step), then all
// batched (7 tokens per step, the few-token path).
TEST_F(GoldenTest, NativeBlockGreedyDecodeMatchesTransformers) {
  for (int32_t max_num_seqs : {1, 64}) {
    const auto ids = GreedyThroughEngine(*cases_, MakeBackend(WeightDtype::kNative),
                                         model_->tokenizer.get(), max_num_seqs);
    ASSERT_EQ(ids.size(), cases_->size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i], (*cases_)[i].greedy_ids)
          << (*cases_)[i].prompt << " (max_num_seqs " << max_num_seqs << ")";
    }
  }
}

}  // namespace
}  // namespace rtgen::testing
