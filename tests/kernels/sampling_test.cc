// Device sampling vs the CPU sampler (engine/sampling/sampler.h) on identical fp32 logits.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <span>

#include "engine/pending_token.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "kernels/sample_penalties.h"
#include "kernels/sampling.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

TEST(SamplingTest, CounterUniformMatchesHostBitForBit) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int n = 100000;
  std::vector<uint64_t> seeds(n), counters(n);
  for (int i = 0; i < n; ++i) {
    seeds[i] = rng();
    counters[i] = i % 7 == 0 ? rng() : static_cast<uint64_t>(i);
  }
  DeviceArray<uint64_t> d_seeds(seeds), d_counters(counters);
  DeviceArray<float> d_out(n);
  GPU_CHECK(kernels::CounterUniformBatch(d_seeds.get(), d_counters.get(), d_out.get(), n, nullptr));
  const std::vector<float> out = d_out.ToHost();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], CounterUniform(seeds[i], counters[i])) << i;
}

// Penalty inputs of a sampler launch: the rows' entries, and the resolved token ids their
// penalty_pending rows index.
struct PenaltyInputs {
  std::vector<kernels::SamplePenaltyEntry> entries;
  std::vector<int32_t> resolved;
};

// A launch's PenaltyInputs built as the backend builds them (kernels::PenaltyEntryBuilder), with
// room for `per_row` entries a row and every row's resolved id 0 until set.
class PenaltyInputsBuilder {
 public:
  PenaltyInputsBuilder(int rows, int per_row, int vocab) : builder_(vocab) {
    inputs_.resolved.assign(rows, 0);
    inputs_.entries.resize(size_t{1} * rows * per_row);
  }
  absl::Status Append(const SamplingParams& h, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, int32_t pending_row,
                      kernels::SampleRowParams* p) {
    return builder_.Append(h, prompt, output, pending_row, inputs_.entries, &used_, p);
  }
  void SetResolved(int row, int32_t id) { inputs_.resolved[row] = id; }
  // The inputs, the entries cut to those appended.
  PenaltyInputs Finish() {
    inputs_.entries.resize(used_);
    return inputs_;
  }

 private:
  kernels::PenaltyEntryBuilder builder_;
  PenaltyInputs inputs_;
  int32_t used_ = 0;
};

constexpr kernels::SampleTopEntry kUnwritten{-7, 42.0f};

// A value the padding of a row carries: any logit read from there would win every comparison.
constexpr float kPaddingLogit = 1e30f;

// Runs the device sampler on `rows` rows of logits with one params per row, greedy rows reduced
// by `splits` blocks each; the split counters must come back to zero. With `penalties`, the
// logits after the launch (penalized in place) go to `logits_after` when given. With `top`, the
// rows' top-n entries ([rows, kMaxTopLogprobs], kUnwritten where a row wrote none).
// `row_stride` > vocab lays the rows out that far apart on the device, the gap filled with
// kPaddingLogit (a multiple of 4: the 16-byte loads with a partial last float4).
void SampleOnDevice(const std::vector<float>& logits, int vocab,
                    const std::vector<kernels::SampleRowParams>& params, int splits,
                    std::vector<int32_t>* tokens, std::vector<float>* logprobs,
                    const PenaltyInputs* penalties = nullptr,
                    std::vector<float>* logits_after = nullptr,
                    std::vector<kernels::SampleTopEntry>* top = nullptr,
                    int64_t row_stride = 0) {
  const int rows = static_cast<int>(params.size());
  const int64_t stride = std::max<int64_t>(row_stride, vocab);
  std::vector<float> laid_out(static_cast<size_t>(rows * stride), kPaddingLogit);
  for (int r = 0; r < rows; ++r) {
    std::copy_n(logits.begin() + int64_t{r} * vocab, vocab, laid_out.begin() + r * stride);
  }
  DeviceArray<float> d_logits(laid_out);
  const PenaltyInputs none;
  const PenaltyInputs& pen = penalties ? *penalties : none;
  DeviceArray<kernels::SamplePenaltyEntry> d_entries(pen.entries);
  DeviceArray<int32_t> d_resolved(pen.resolved);
  DeviceArray<kernels::SampleRowParams> d_params(params);
  DeviceArray<int32_t> d_tokens(rows);
  DeviceArray<float> d_logprobs(rows);
  DeviceArray<uint8_t> d_states(size_t{1} * rows * splits * kernels::kSampleSplitStateBytes);
  const std::vector<int32_t> zeros(rows, 0);
  DeviceArray<int32_t> d_counters(zeros);
  kernels::SampleTokensParams p{d_logits.get(), stride, d_params.get(), d_tokens.get(),
                                d_logprobs.get(), rows,   vocab};
  p.splits = splits;
  p.split_states = d_states.get();
  p.split_counters = d_counters.get();
  if (penalties) {
    p.penalty_entries = d_entries.get();
    p.resolved_token_ids = d_resolved.get();
  }
  // Entries a row does not write keep kUnwritten.
  const std::vector<kernels::SampleTopEntry> unwritten(size_t{1} * rows * kernels::kMaxTopLogprobs,
                                                       kUnwritten);
  DeviceArray<kernels::SampleTopEntry> d_top(unwritten);
  DeviceArray<uint64_t> d_split_top(size_t{1} * rows * splits * kernels::kMaxTopLogprobs);
  if (top) {
    p.top = d_top.get();
    p.split_top = d_split_top.get();
  }
  GPU_CHECK(kernels::SampleTokens(p, nullptr));
  *tokens = d_tokens.ToHost();
  *logprobs = d_logprobs.ToHost();
  if (logits_after) {
    const std::vector<float> after = d_logits.ToHost();
    logits_after->resize(size_t{1} * rows * vocab);
    for (int r = 0; r < rows; ++r) {
      std::copy_n(after.begin() + r * stride, vocab, logits_after->begin() + int64_t{r} * vocab);
      EXPECT_TRUE(std::all_of(after.begin() + r * stride + vocab, after.begin() + (r + 1) * stride,
                              [](float x) { return x == kPaddingLogit; }))
          << "row " << r << ": padding written";
    }
  }
  if (top) *top = d_top.ToHost();
  EXPECT_EQ(d_counters.ToHost(), zeros);
}

// A logits layout: the vocabulary, and the row stride on the device (0: the vocabulary).
struct Layout {
  int vocab;
  int64_t stride;
};

// 1001 unpadded: rows not 16-byte aligned (the scalar loads, split or not); padded to 1004: the
// 16-byte loads with the last id alone in its float4 and padding after it.
constexpr Layout kLayouts[] = {{1000, 0}, {1001, 0}, {1001, 1004}, {49152, 0}, {128256, 0}};

struct Config {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};

// One row of `c` for the device and the CPU sampler alike, with `logprobs` top-n entries and a
// seed and counter drawn from `rng`.
void AddRow(const Config& c, int32_t logprobs, std::mt19937_64& rng,
            std::vector<kernels::SampleRowParams>* device, std::vector<SamplingParams>* host) {
  SamplingParams h;
  h.temperature = c.temperature;
  h.top_k = c.top_k;
  h.top_p = c.top_p;
  h.min_p = c.min_p;
  h.logprobs = logprobs;
  kernels::SampleRowParams p;
  p.temperature = h.temperature;
  p.top_k = h.top_k;
  p.top_p = h.top_p;
  p.min_p = h.min_p;
  p.top_logprobs = h.logprobs;
  p.seed = rng();
  p.counter = rng() % 1000;
  device->push_back(p);
  host->push_back(h);
}

// Rows [0, rows) of a launch against the CPU sampler on the same logits: the same token, a finite
// logprob within 1e-3 of the CPU's, and the CPU's top-n entries (logprobs within 1e-4).
void ExpectRowsMatchCpu(const std::vector<float>& logits, int vocab,
                        const std::vector<kernels::SampleRowParams>& params,
                        const std::vector<SamplingParams>& host_params, int rows,
                        const std::vector<int32_t>& tokens, const std::vector<float>& logprobs,
                        const std::vector<kernels::SampleTopEntry>& top) {
  for (int r = 0; r < rows; ++r) {
    SCOPED_TRACE(testing::Message() << "row " << r);
    std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                           logits.begin() + size_t{1} * (r + 1) * vocab);
    std::vector<int32_t> fake_output(params[r].counter, 0);  // its size is the counter
    const SampledToken cpu = SampleToken(row, host_params[r], {}, fake_output, params[r].seed);
    EXPECT_EQ(tokens[r], cpu.token_id);
    EXPECT_TRUE(std::isfinite(logprobs[r])) << logprobs[r];
    EXPECT_NEAR(logprobs[r], cpu.logprob, 1e-3);
    const kernels::SampleTopEntry* got = top.data() + size_t{1} * r * kernels::kMaxTopLogprobs;
    for (size_t j = 0; j < cpu.top.size(); ++j) {
      EXPECT_EQ(got[j].token, cpu.top[j].token_id) << "entry " << j;
      EXPECT_NEAR(got[j].logprob, cpu.top[j].logprob, 1e-4) << "entry " << j;
    }
  }
}

// At greedy splits 1, 3 and the most, each with top-n entries: rows [0, cpu_rows) match the CPU
// sampler (ExpectRowsMatchCpu), and `check` adds a test's own expectations on the tokens.
void ExpectEverySplitMatchesCpu(const std::vector<float>& logits, int vocab, int64_t stride,
                                const std::vector<kernels::SampleRowParams>& params,
                                const std::vector<SamplingParams>& host_params, int cpu_rows,
                                const std::function<void(const std::vector<int32_t>&)>& check) {
  for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
    SCOPED_TRACE(testing::Message() << "greedy splits " << splits);
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<kernels::SampleTopEntry> top;
    SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs, nullptr, nullptr, &top,
                   stride);
    ExpectRowsMatchCpu(logits, vocab, params, host_params, cpu_rows, tokens, logprobs, top);
    check(tokens);
  }
}

TEST(SamplingTest, MatchesCpuSampler) {
  // Top-k without top-p (alone, or with min-p) too: the CPU draws its candidates best first as
  // the device does (it drew them in its heap's order before).
  const std::vector<Config> configs = {
      {0.0f, 0, 1.0f, 0.0f},  {1.0f, 0, 1.0f, 0.0f},   {0.7f, 0, 0.9f, 0.0f},
      {0.8f, 50, 0.95f, 0.0f}, {1.0f, 0, 1.0f, 0.05f}, {1.3f, 0, 0.5f, 0.1f},
      {1.0f, 40, 1.0f, 0.0f}, {1.0f, 40, 1.0f, 0.05f}, {0.9f, 1, 1.0f, 0.0f}};
  for (const auto [vocab, stride] : kLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "stride " << stride << " seed " << seed);
    std::mt19937_64 rng(seed);
    const int rows_per_config = 16;
    std::vector<kernels::SampleRowParams> params;
    std::vector<SamplingParams> host_params;
    for (const Config& c : configs) {
      for (int r = 0; r < rows_per_config; ++r) AddRow(c, 0, rng, &params, &host_params);
    }
    const int rows = static_cast<int>(params.size());
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    // A tie at the maximum of row 0: greedy must take the lower id.
    const auto row0 = logits.begin();
    const float top = *std::max_element(row0, row0 + vocab) + 1.0f;
    logits[7] = logits[vocab - 3] = top;
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", greedy splits " << splits);
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs, nullptr, nullptr, nullptr,
                     stride);
      EXPECT_EQ(tokens[0], 7);  // the tied ids lie in different parts when split
      int mismatches = 0;
      for (int r = 0; r < rows; ++r) {
        std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                               logits.begin() + size_t{1} * (r + 1) * vocab);
        // Only its size (the counter) matters.
        std::vector<int32_t> fake_output(params[r].counter, 0);
        const SampledToken cpu = SampleToken(row, host_params[r], {}, fake_output, params[r].seed);
        if (tokens[r] != cpu.token_id) ++mismatches;
        EXPECT_EQ(tokens[r], cpu.token_id) << "row " << r << " config " << r / rows_per_config;
        EXPECT_NEAR(logprobs[r], cpu.logprob, 1e-3) << "row " << r;
      }
      EXPECT_EQ(mismatches, 0);
      // Same seeds and counters: the same tokens again.
      std::vector<int32_t> again;
      SampleOnDevice(logits, vocab, params, splits, &again, &logprobs, nullptr, nullptr, nullptr,
                     stride);
      EXPECT_EQ(again, tokens);
    }
  }
}

// A NaN logit counts as -inf on the device as on the CPU (engine/sampling/sampler.cc): every
// config of MatchesCpuSampler, greedy rows with top-n logprobs too, over rows with NaN at every
// 7th id, gives the CPU's token (never a NaN id) with a finite logprob near the CPU's, and the
// CPU's top-n list; a row of nothing but NaN gives id 0, greedy or sampled. Before, a greedy
// row's logprob was NaN and a sampled row's top-k took the NaN ids first (their keys ranked above
// +inf); a sampled row of nothing but NaN drew the last id on the CPU.
TEST(SamplingTest, NanLogitsCountAsMinusInfinity) {
  const std::vector<Config> configs = {{0.0f, 0, 1.0f, 0.0f},   {1.0f, 0, 1.0f, 0.0f},
                                       {0.7f, 0, 0.9f, 0.0f},   {0.8f, 50, 0.95f, 0.0f},
                                       {1.0f, 0, 1.0f, 0.05f},  {1.0f, 40, 1.0f, 0.0f}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto [vocab, stride] : kLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "vocab " << vocab << " stride " << stride << " seed "
                                    << seed);
    std::mt19937_64 rng(seed);
    const int rows_per_config = 4;
    std::vector<kernels::SampleRowParams> params;
    std::vector<SamplingParams> host_params;
    for (const Config& c : configs) {
      for (int r = 0; r < rows_per_config; ++r) {
        AddRow(c, r % 2 == 0 ? 5 : 0, rng, &params, &host_params);
      }
    }
    // Rows of nothing but NaN: greedy, sampled over every id, sampled with top-k and top-p.
    const int nan_rows = 3, first_nan_row = static_cast<int>(params.size());
    for (const Config& c : {configs[0], configs[1], configs[3]}) {
      AddRow(c, 0, rng, &params, &host_params);
    }
    const int rows = static_cast<int>(params.size());
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < vocab; ++i) {
        if (i % 7 == 0 || r >= first_nan_row) logits[size_t{1} * r * vocab + i] = nan;
      }
    }
    ExpectEverySplitMatchesCpu(
        logits, vocab, stride, params, host_params, first_nan_row,
        [&](const std::vector<int32_t>& tokens) {
          for (int r = first_nan_row; r < first_nan_row + nan_rows; ++r) {
            std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                                   logits.begin() + size_t{1} * (r + 1) * vocab);
            std::vector<int32_t> fake_output(params[r].counter, 0);
            EXPECT_EQ(SampleToken(row, host_params[r], {}, fake_output, params[r].seed).token_id,
                      0)
                << "row " << r;
            EXPECT_EQ(tokens[r], 0) << "row " << r;
          }
          for (int r = 0; r < first_nan_row; ++r) EXPECT_NE(tokens[r] % 7, 0) << "row " << r;
        });
  }
}

// A +inf logit takes all the mass on the device as on the CPU (engine/sampling/sampler.cc), shared
// evenly by the +inf ids of a row: every config of NanLogitsCountAsMinusInfinity, rows with one
// +inf (the last id on some: the scalar tail or the last split) or two (in different splits at
// 3+ splits), each with NaN at every 7th id too, give the CPU's token (a +inf id) and top-n with
// a finite logprob. On some rows the first is 3e38 instead, +inf once a temperature below 1
// scales it. Before, exp(inf - inf) made the logprobs NaN and the draw took any id.
TEST(SamplingTest, PlusInfinityLogitsTakeAllTheMass) {
  const std::vector<Config> configs = {{0.0f, 0, 1.0f, 0.0f},   {1.0f, 0, 1.0f, 0.0f},
                                       {0.7f, 0, 0.9f, 0.0f},   {0.8f, 50, 0.95f, 0.0f},
                                       {1.0f, 0, 1.0f, 0.05f},  {1.0f, 40, 1.0f, 0.0f}};
  for (const auto [vocab, stride] : kLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "vocab " << vocab << " stride " << stride << " seed "
                                    << seed);
    std::mt19937_64 rng(seed);
    std::vector<kernels::SampleRowParams> params;
    std::vector<SamplingParams> host_params;
    for (const Config& c : configs) {
      for (int r = 0; r < 4; ++r) AddRow(c, r % 2 == 0 ? 5 : 0, rng, &params, &host_params);
    }
    const int rows = static_cast<int>(params.size());
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    std::vector<std::vector<int>> inf_ids(rows);
    for (int r = 0; r < rows; ++r) {
      float* row = logits.data() + size_t{1} * r * vocab;
      for (int i = 0; i < vocab; i += 7) row[i] = std::numeric_limits<float>::quiet_NaN();
      const int first = r % 3 == 0 ? vocab - 1 : 1 + static_cast<int>(rng() % (vocab - 2));
      inf_ids[r] = {first};
      if (r % 2 == 1) inf_ids[r].push_back((first + vocab / 2) % vocab);
      for (int id : inf_ids[r]) row[id] = INFINITY;
      if (r % 4 == 2) row[first] = 3e38f;
    }
    ExpectEverySplitMatchesCpu(
        logits, vocab, stride, params, host_params, rows, [&](const std::vector<int32_t>& tokens) {
          for (int r = 0; r < rows; ++r) {
            EXPECT_NE(std::find(inf_ids[r].begin(), inf_ids[r].end(), tokens[r]),
                      inf_ids[r].end())
                << "row " << r << " drew " << tokens[r];
          }
        });
  }
}

// Greedy edge cases, unsplit and split: a row of -inf only gives id 0; ties inside one float4 and
// inside one thread's batch of loads go to the lower id; a maximum at the last id (the scalar tail
// when rows are not 16-byte aligned) is found; logprobs match the CPU and repeat bit for bit.
TEST(SamplingTest, GreedyEdgeCases) {
  for (const auto [vocab, stride] : kLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "stride " << stride << " seed " << seed);
    std::mt19937_64 rng(seed);
    const int rows = 4;
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    const auto row = [&](int r) { return logits.begin() + size_t{1} * r * vocab; };
    std::fill(row(0), row(0) + vocab, -INFINITY);
    const float top = 100.0f;
    row(1)[4] = row(1)[5] = top;                 // one float4 of one thread
    row(2)[vocab - 1] = top;                     // the last id
    row(3)[9] = top;                             // ids 9 and 9 + 4 * 512: one thread's batch
    if (vocab > 9 + 4 * 512) row(3)[9 + 4 * 512] = top;
    const std::vector<kernels::SampleRowParams> params(rows);  // greedy
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", greedy splits " << splits);
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs, nullptr, nullptr, nullptr,
                     stride);
      EXPECT_EQ(tokens, (std::vector<int32_t>{0, 4, vocab - 1, 9}));
      SamplingParams greedy;
      greedy.temperature = 0.0f;
      for (int r = 1; r < rows; ++r) {
        std::vector<float> host(row(r), row(r) + vocab);
        EXPECT_NEAR(logprobs[r], SampleToken(host, greedy, {}, {}, 0).logprob, 1e-3) << r;
      }
      std::vector<int32_t> again;
      std::vector<float> logprobs_again;
      SampleOnDevice(logits, vocab, params, splits, &again, &logprobs_again, nullptr, nullptr,
                     nullptr, stride);
      EXPECT_EQ(again, tokens);
      for (int r = 1; r < rows; ++r) {
        EXPECT_EQ(std::memcmp(&logprobs[r], &logprobs_again[r], sizeof(float)), 0) << r;
      }
    }
  }
}

// Penalties on the device against the CPU sampler. Rows with random prompts and outputs (many
// repeats, a few ids outside the vocabulary, which both sides skip), entries built by the
// backend's PenaltyEntryBuilder; a third of the rows end their output with a pending token the
// device reads from the resolved ids (a token of its own, or one already in the prompt or the
// output). Two seen tokens
// of each row are lifted to the top of its logits so that penalties decide the draw. Greedy
// rows' penalized logits must be the CPU's bit for bit; tokens equal, logprobs within 1e-3.
// Sampled rows with penalties beside top-p, top-k and min-p (each cut made after the penalties).
TEST(SamplingTest, PenaltiesMatchCpuSampler) {
  struct PenaltyConfig {
    float temperature, top_p, repetition, presence, frequency;
    int32_t top_k = 0;
    float min_p = 0.0f;
  };
  const std::vector<PenaltyConfig> configs = {{0.0f, 1.0f, 1.3f, 0.0f, 0.0f},
                                              {0.0f, 1.0f, 1.0f, 0.5f, 0.3f},
                                              {0.0f, 1.0f, 0.7f, -0.4f, 1.1f},
                                              {0.8f, 0.9f, 1.2f, 0.3f, 0.2f},
                                              {1.0f, 1.0f, 1.5f, 0.0f, 0.6f},
                                              {0.9f, 1.0f, 1.3f, 0.2f, 0.0f, 20},
                                              {0.7f, 0.95f, 1.1f, 0.0f, 0.4f, 0, 0.05f}};
  for (const auto [vocab, stride] : kLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "vocab " << vocab << " stride " << stride << " seed "
                                    << seed);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> near_id(0, std::min(vocab, 300) - 1);
    const int rows_per_config = 12;
    const int rows = rows_per_config * static_cast<int>(configs.size());
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    std::vector<kernels::SampleRowParams> params(rows);
    std::vector<SamplingParams> host_params(rows);
    std::vector<std::vector<int32_t>> prompts(rows), outputs(rows);  // outputs as the CPU sees
    PenaltyInputsBuilder penalties(rows, 400, vocab);
    for (int r = 0; r < rows; ++r) {
      const PenaltyConfig& c = configs[r / rows_per_config];
      SamplingParams& h = host_params[r];
      h.temperature = c.temperature;
      h.top_p = c.top_p;
      h.repetition_penalty = c.repetition;
      h.presence_penalty = c.presence;
      h.frequency_penalty = c.frequency;
      h.top_k = c.top_k;
      h.min_p = c.min_p;
      const auto draw = [&](int n, std::vector<int32_t>* out) {
        for (int i = 0; i < n; ++i) out->push_back(rng() % 50 == 0 ? vocab + 5 : near_id(rng));
      };
      draw(static_cast<int>(rng() % 200), &prompts[r]);
      draw(static_cast<int>(rng() % 60), &outputs[r]);
      std::vector<int32_t> device_output = outputs[r];
      int32_t pending_row = -1;
      if (r % 3 != 0) {  // pending: a token of its own (1) or one already seen (2)
        std::vector<int32_t> seen_ids;  // in the prompt or the output
        for (const std::vector<int32_t>* v : {&prompts[r], &outputs[r]}) {
          for (int32_t t : *v) {
            if (t < vocab) seen_ids.push_back(t);
          }
        }
        const bool seen = r % 3 == 2 && !seen_ids.empty();
        const int32_t value = seen ? seen_ids[rng() % seen_ids.size()] : vocab - 1 - r % 7;
        penalties.SetResolved(r, value);
        pending_row = r;
        outputs[r].push_back(value);
        device_output.push_back(PendingToken(0));
      }
      kernels::SampleRowParams& p = params[r];
      p.temperature = c.temperature;
      p.top_p = c.top_p;
      p.top_k = c.top_k;
      p.min_p = c.min_p;
      p.seed = rng();
      p.counter = outputs[r].size();
      ASSERT_TRUE(penalties.Append(h, prompts[r], device_output, pending_row, &p).ok());
      // Lift two seen tokens to the top (penalties now decide between them and the rest).
      float* row = logits.data() + size_t{1} * r * vocab;
      const float top = *std::max_element(row, row + vocab);
      std::vector<int32_t> seen;
      for (int32_t t : outputs[r]) {
        if (t < vocab) seen.push_back(t);
      }
      for (int32_t t : prompts[r]) {
        if (t < vocab) seen.push_back(t);
      }
      if (!seen.empty()) {
        row[seen[rng() % seen.size()]] = top + 0.5f;
        row[seen[rng() % seen.size()]] = -top - 0.5f;  // a negative one: l * penalty
        // A +inf one on some rows: still +inf penalized, then the largest float on both sides.
        if (r % 4 == 1) row[seen[rng() % seen.size()]] = INFINITY;
      }
    }
    const PenaltyInputs pen = penalties.Finish();
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "greedy splits " << splits);
      std::vector<int32_t> tokens, again;
      std::vector<float> logprobs, after;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs, &pen, &after, nullptr,
                     stride);
      int penalty_decided = 0;
      for (int r = 0; r < rows; ++r) {
        std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                               logits.begin() + size_t{1} * (r + 1) * vocab);
        const int32_t unpenalized =
            static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        const SampledToken cpu =
            SampleToken(row, host_params[r], prompts[r], outputs[r], params[r].seed);
        EXPECT_EQ(tokens[r], cpu.token_id) << "row " << r;
        EXPECT_NEAR(logprobs[r], cpu.logprob, 1e-3) << "row " << r;
        if (host_params[r].greedy()) {
          penalty_decided += cpu.token_id != unpenalized;
          // The device leaves a greedy row's penalized logits raw (its loads map NaN and +inf as
          // FiniteLogit does); the CPU's row holds them mapped.
          std::vector<float> taken(after.begin() + size_t{1} * r * vocab,
                                   after.begin() + size_t{1} * (r + 1) * vocab);
          for (float& x : taken) {
            x = std::isnan(x) ? -INFINITY : std::min(x, std::numeric_limits<float>::max());
          }
          EXPECT_EQ(std::memcmp(taken.data(), row.data(), sizeof(float) * vocab), 0)
              << "row " << r << ": penalized logits differ from the CPU's";
        }
      }
      EXPECT_GT(penalty_decided, 0);  // the test could tell penalties from none
      SampleOnDevice(logits, vocab, params, splits, &again, &logprobs, &pen, nullptr, nullptr,
                     stride);
      EXPECT_EQ(again, tokens);
    }
  }
}

// Row 12 of TopLogprobsMatchCpuSampler: greedy, n = kMaxTopLogprobs.
constexpr int kDefeatRow = 12;

// The thread of the sampler's 512 that reads id i of an unsplit row with 16-byte loads
// (sample_top.cuh ForEachOwnLogit): float4 c (ids 4c..4c+3) is thread c % 512's, and the ids
// after the last whole float4 go one to each thread from thread 0.
int OwnerThread(int i, int vocab) {
  const int whole = vocab / 4 * 4;
  return i < whole ? (i / 4) % 512 : (i - whole) % 512;
}

// The device's fast top-n path (kernels/sample_top.cuh BlockTopKeys) ranks the keys at or above
// a threshold, the larger of two bounds from its threads' largest keys (a thread's warp is
// thread / 32): the largest over the warps of their n-th largest lane maximum, and the smallest
// over the warps of their ceil(n / 16)-th. Here lanes 0..n-2 of warps 0..14 own values near 20,
// the rest N(0, 3), so both bounds are N(0, 3) values and about half the row passes them, far
// more than that path takes: the insertion path must give the answer.
void DefeatTopThreshold(float* row, int vocab, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < vocab; ++i) {
    const int thread = OwnerThread(i, vocab);
    const bool high = thread % 32 < kernels::kMaxTopLogprobs - 1 && thread / 32 < 15;
    row[i] = high ? 20.0f + normal(rng) : 3.0f * normal(rng);
  }
}

// How many ids of `row` reach that threshold for n (an unsplit row read with 16-byte loads,
// every warp with ids), on the host.
int TopThresholdCandidates(const float* row, int vocab, int n) {
  const auto better = [row](int a, int b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  };
  std::vector<int> thread_max(512, -1);
  for (int i = 0; i < vocab; ++i) {
    int& m = thread_max[OwnerThread(i, vocab)];
    if (m < 0 || better(i, m)) m = i;
  }
  const int j = (n + 15) / 16;
  int largest_nth = -1, smallest_jth = -1;
  for (int w = 0; w < 16; ++w) {
    std::vector<int> lanes(thread_max.begin() + 32 * w, thread_max.begin() + 32 * (w + 1));
    std::sort(lanes.begin(), lanes.end(), better);
    if (largest_nth < 0 || better(lanes[n - 1], largest_nth)) largest_nth = lanes[n - 1];
    if (smallest_jth < 0 || better(smallest_jth, lanes[j - 1])) smallest_jth = lanes[j - 1];
  }
  const int threshold = better(largest_nth, smallest_jth) ? largest_nth : smallest_jth;
  int count = 0;
  for (int i = 0; i < vocab; ++i) count += !better(threshold, i);
  return count;
}

// Top-n logprobs on the device against the CPU sampler's, for greedy rows (whole, or split over
// 3 or 32 blocks whose lists the last one merges; at 1001 ids the last of 32 parts holds 9),
// sampled rows and penalized rows, n from 1 to kMaxTopLogprobs, rows with many ties (logits
// rounded to whole numbers: ties go to the lower id) and with -inf logits, a vocabulary smaller
// than n, rows not 16-byte aligned (1001), rows padded after a partial last float4 (1001 in
// 1004, 49155 in 49160) and the 8B shape's vocabulary, and at the large vocabularies a row
// whose candidates overflow the fast path when it is not split (DefeatTopThreshold). Ids
// must be the CPU's in its order, logprobs within 1e-4 of the CPU's, a greedy row's token its
// first entry; rows asking for none, and entries past n, stay unwritten; two rows ask for more
// than kMaxTopLogprobs and get that many.
TEST(SamplingTest, TopLogprobsMatchCpuSampler) {
  const int ns[] = {1, 2, 5, kernels::kMaxTopLogprobs, 0, 3};
  constexpr Layout kTopLayouts[] = {{7, 0},     {1001, 0},     {1001, 1004},
                                    {49152, 0}, {49155, 49160}, {128256, 0}};
  for (const auto [vocab, stride] : kTopLayouts) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(testing::Message() << "vocab " << vocab << " stride " << stride << " seed "
                                    << seed);
    std::mt19937_64 rng(seed);
    const int rows = 36;
    std::vector<float> logits = RandomNormal(size_t{1} * rows * vocab, 3.0f, rng);
    std::vector<kernels::SampleRowParams> params(rows);
    std::vector<SamplingParams> host_params(rows);
    std::vector<std::vector<int32_t>> prompts(rows);
    PenaltyInputsBuilder penalties(rows, 64, vocab);
    for (int r = 0; r < rows; ++r) {
      SamplingParams& h = host_params[r];
      const int kind = r % 4;  // greedy, sampled, sampled with top-k, greedy with penalties
      h.temperature = kind == 0 || kind == 3 ? 0.0f : 0.8f;
      if (kind == 1) h.top_p = 0.9f;
      if (kind == 2) h.top_k = 5;
      if (kind == 3) {
        h.repetition_penalty = 1.4f;
        h.frequency_penalty = 0.5f;
      }
      h.logprobs = ns[(r / 4) % 6];
      float* row = logits.data() + size_t{1} * r * vocab;
      if (r % 3 == 1) {
        for (int i = 0; i < vocab; ++i) row[i] = std::round(row[i]);  // many ties
      }
      if (r % 5 == 2) {
        for (int i = 0; i < vocab; i += 2) row[i] = -INFINITY;
      }
      if (r == kDefeatRow && vocab >= 49152) DefeatTopThreshold(row, vocab, rng);
      kernels::SampleRowParams& p = params[r];
      p.temperature = h.temperature;
      p.top_k = h.top_k;
      p.top_p = h.top_p;
      p.seed = rng();
      // Rows 13 and 15 (n = kMaxTopLogprobs, one sampled, one greedy) ask the device for more
      // than a row has room for: it gives kMaxTopLogprobs.
      p.top_logprobs = r == 13 || r == 15 ? 1000 : h.logprobs;
      if (kind == 3) {
        for (int i = 0; i < 40; ++i) prompts[r].push_back(static_cast<int32_t>(rng() % vocab));
        // One prompt token lifted to the top: the penalty moves it down the list.
        row[prompts[r][0]] = *std::max_element(row, row + vocab) + 0.25f;
        ASSERT_TRUE(penalties.Append(h, prompts[r], {}, -1, &p).ok());
      }
    }
    const PenaltyInputs pen = penalties.Finish();
    ASSERT_EQ(host_params[kDefeatRow].logprobs, kernels::kMaxTopLogprobs);
    ASSERT_EQ(host_params[13].logprobs, kernels::kMaxTopLogprobs);
    ASSERT_EQ(host_params[15].logprobs, kernels::kMaxTopLogprobs);
    ASSERT_TRUE(host_params[kDefeatRow].greedy());
    if (vocab >= 49152) {
      EXPECT_GT(TopThresholdCandidates(logits.data() + size_t{1} * kDefeatRow * vocab, vocab,
                                       kernels::kMaxTopLogprobs),
                4096);
    }
    for (int splits : {1, 3, kernels::kMaxSampleSplits}) {
      SCOPED_TRACE(testing::Message() << "greedy splits " << splits);
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      std::vector<kernels::SampleTopEntry> top;
      SampleOnDevice(logits, vocab, params, splits, &tokens, &logprobs, &pen, nullptr, &top,
                     stride);
      for (int r = 0; r < rows; ++r) {
        SCOPED_TRACE(testing::Message() << "row " << r << ", n " << host_params[r].logprobs);
        std::vector<float> row(logits.begin() + size_t{1} * r * vocab,
                               logits.begin() + size_t{1} * (r + 1) * vocab);
        const SampledToken cpu = SampleToken(row, host_params[r], prompts[r], {}, params[r].seed);
        if (host_params[r].top_k == 0) {
          EXPECT_EQ(tokens[r], cpu.token_id);
        }
        const kernels::SampleTopEntry* got = top.data() + size_t{1} * r * kernels::kMaxTopLogprobs;
        ASSERT_EQ(cpu.top.size(), std::min<size_t>(host_params[r].logprobs, vocab));
        for (size_t j = 0; j < cpu.top.size(); ++j) {
          EXPECT_EQ(got[j].token, cpu.top[j].token_id) << "entry " << j;
          if (std::isinf(cpu.top[j].logprob)) {
            EXPECT_EQ(got[j].logprob, cpu.top[j].logprob) << "entry " << j;
          } else {
            EXPECT_NEAR(got[j].logprob, cpu.top[j].logprob, 1e-4) << "entry " << j;
          }
        }
        if (host_params[r].greedy() && !cpu.top.empty()) {
          EXPECT_EQ(got[0].token, tokens[r]);
        }
        for (int j = static_cast<int>(cpu.top.size()); j < kernels::kMaxTopLogprobs; ++j) {
          EXPECT_EQ(got[j].token, kUnwritten.token) << "entry " << j << " written";
        }
      }
    }
  }
}


// A sampled row's logits are scaled as the CPU sampler scales them (times 1 / t rounded to
// fp32, not divided by t): two logits that the CPU's scaling ties but division would not tie
// must come back in the CPU's top-n order, the lower id first (divided, the higher id's larger
// quotient would lead).
TEST(SamplingTest, TemperatureScalesAsTheCpuSampler) {
  const float t = 1.3f;
  const float inv_t = 1.0f / t;
  float x = 0.0f, y = 0.0f;  // adjacent floats: x * inv_t == y * inv_t, x / t < y / t
  for (float v = 12.0f; v < 16.0f && y == 0.0f; v = std::nextafter(v, 32.0f)) {
    const float w = std::nextafter(v, 32.0f);
    if (v * inv_t == w * inv_t && v / t != w / t) x = v, y = w;
  }
  ASSERT_GT(y, x) << "no such pair in [12, 16)";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int vocab = 64, low = 10, high = 20;
  std::vector<float> logits = RandomNormal(vocab, 1.0f, rng);
  logits[low] = x;
  logits[high] = y;
  kernels::SampleRowParams row;
  row.temperature = t;
  row.seed = rng();
  row.top_logprobs = 2;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<kernels::SampleTopEntry> top;
  SampleOnDevice(logits, vocab, {row}, 1, &tokens, &logprobs, nullptr, nullptr, &top);
  SamplingParams host;
  host.temperature = t;
  host.logprobs = 2;
  const SampledToken cpu = SampleToken(logits, host, {}, {}, row.seed);
  ASSERT_EQ(cpu.top.size(), 2u);
  EXPECT_EQ(cpu.top[0].token_id, low);
  EXPECT_EQ(cpu.top[1].token_id, high);
  EXPECT_EQ(top[0].token, low);
  EXPECT_EQ(top[1].token, high);
  EXPECT_EQ(top[0].logprob, top[1].logprob);  // the same scaled logit
  EXPECT_EQ(tokens[0], cpu.token_id);
}

}  // namespace
}  // namespace rtgen::testing_gpu
