// Pipelined steps on the CUDA backend: step N+1 launched before step N is collected, its decode
// tokens given as PendingToken(j) and read on the device from step N's sampled tokens. The
// streams must equal serial Execute with the real tokens fed back (same weights, same batches),
// graph and eager, greedy and seeded sampling, with the batch order changing between steps so a
// stand-in's sample index differs from its position, and a fourth sequence whose whole prompt
// joins one step (a mixed prefill + decode step: with graphs, as the server runs it, the replay of
// a multi-sequence prefill graph whose decode rows hold stand-ins) and then decodes too.
// Penalties run on the device in both (a pending last output token read there too), and their
// streams equal serial steps whose penalized rows are sampled on the host by the CPU sampler —
// also when steps run as the engine runs them and a row's penalties cross the device's token
// limit mid-stream. Three sequences ask for top-n logprobs, which the device returns as the
// CPU sampler does.
// Also the refusals: a stand-in naming a row sampled on the host, a third step in flight,
// Execute while steps are in flight, a stand-in naming a step after which a launch failed once
// its sampler was queued (a failure before that keeps the chain).

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "engine/pending_token.h"
#include "gtest/gtest.h"
#include "kernels/sample_row_params.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/test_backends.h"

namespace rtgen::testing_gpu {
namespace {

constexpr int kSeqs = 4;   // sequences 0..2 decode from the start; 3 joins at step kJoin
constexpr int kSteps = 8;
constexpr int kJoin = 3;

struct Session {
  std::unique_ptr<CudaBackend> backend;
  std::vector<TestSeq> seqs;
  int32_t next_block = 0;
};

// Prefills sequences 0..2 (logits only) and gives each a first decode token; sequence 3 gets a
// prompt only (prefilled inside the decode run, at step kJoin). With graphs, prefill graphs too.
Session Start(const ModelConfig& c, uint64_t seed, bool graphs,
              int32_t max_penalty_tokens = CudaBackendOptions{}.max_penalty_tokens) {
  Session r;
  r.backend = MakeCudaBackend(c, seed,
                              {.graphs = graphs,
                               .max_prefill_graph_tokens = graphs ? 512 : 0,
                               .max_penalty_tokens = max_penalty_tokens});
  if (!r.backend) return r;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  r.seqs.resize(kSeqs);
  StepBuilder b(kTestBlockSize, &r.next_block);
  for (int i = 0; i < kSeqs; ++i) {
    TestSeq& s = r.seqs[i];
    s.tokens.reserve(256);
    s.output.reserve(64);  // spans of launched steps point here: no reallocation
    s.tokens.resize(12 + 9 * i);
    for (int32_t& t : s.tokens) t = tok(rng);
    s.seed = 500 + i;
    if (i < kJoin) b.Add(s, static_cast<int32_t>(s.tokens.size()), nullptr);
  }
  EXPECT_TRUE(r.backend->ComputeLogits(b.Build(false)).ok());
  for (int i = 0; i < kJoin; ++i) {
    r.seqs[i].tokens.push_back(7 + i);
    r.seqs[i].output.push_back(7 + i);
  }
  return r;
}

// The sequences of step `step` in batch order: the decoding ones (reversed on odd steps), then
// at step kJoin sequence 3's whole prompt.
std::vector<int> Order(int step) {
  std::vector<int> order;
  const int decoding = step > kJoin ? kSeqs : kJoin;
  for (int k = 0; k < decoding; ++k) order.push_back(step % 2 == 0 ? k : decoding - 1 - k);
  if (step == kJoin) order.push_back(kJoin);
  return order;
}

// Builds step `step`: one decode token per decoding sequence, sequence 3's prompt at kJoin.
StepInput BuildStep(Session& r, int step, const std::vector<SamplingParams>& params) {
  StepBuilder b(kTestBlockSize, &r.next_block);
  for (int i : Order(step)) {
    TestSeq& s = r.seqs[i];
    const int32_t count = step == kJoin && i == kJoin ? static_cast<int32_t>(s.tokens.size()) : 1;
    b.Add(s, count, &params[i]);
  }
  return b.Build(step != kJoin);
}

using Streams = std::vector<std::vector<int32_t>>;

enum class Penalties { kNone, kOnDevice, kOnHost };

// Sequences 0 and 1 greedy, 2 and 3 seeded sampling; 0, 1 and 3 ask for top-n logprobs; unless
// kNone, 0, 2 and 3 with penalties, sampled on the host by the CPU sampler with kOnHost (Serial
// runs a backend whose max_penalty_tokens is 0).
std::vector<SamplingParams> Params(Penalties penalties = Penalties::kOnDevice) {
  std::vector<SamplingParams> p(kSeqs);
  for (SamplingParams& q : p) q.temperature = 0.0f;
  for (int i : {2, 3}) {  // seeded sampling on the device
    p[i].temperature = 1.5f;
    p[i].top_p = 0.9f;
  }
  p[0].logprobs = 3;
  p[1].logprobs = kernels::kMaxTopLogprobs;
  p[3].logprobs = 1;
  if (penalties == Penalties::kNone) return p;
  p[0].repetition_penalty = 1.3f;
  p[0].presence_penalty = 0.4f;
  p[0].frequency_penalty = 0.5f;
  p[2].repetition_penalty = 1.2f;
  p[3].presence_penalty = 0.7f;
  return p;
}

// Each sequence's sampled tokens, with their logprobs, in step order.
using Samples = std::vector<std::vector<SampledToken>>;

// Steps one after the other through Execute; with `samples`, what each step returned.
Streams Serial(const ModelConfig& c, uint64_t seed, bool graphs,
               Penalties penalties = Penalties::kOnDevice, Samples* samples = nullptr) {
  Session r = Start(c, seed, graphs,
                    penalties == Penalties::kOnHost ? 0 : CudaBackendOptions{}.max_penalty_tokens);
  std::vector<std::vector<int32_t>> streams(kSeqs);
  if (samples) samples->assign(kSeqs, {});
  if (!r.backend) return streams;
  const std::vector<SamplingParams> params = Params(penalties);
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<StepOutput> out = r.backend->Execute(BuildStep(r, step, params));
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return streams;
    const std::vector<int> order = Order(step);
    for (size_t k = 0; k < order.size(); ++k) {
      TestSeq& s = r.seqs[order[k]];
      s.tokens.push_back(out->sampled[k].token_id);
      s.output.push_back(out->sampled[k].token_id);
      streams[order[k]].push_back(out->sampled[k].token_id);
      if (samples) (*samples)[order[k]].push_back(out->sampled[k]);
    }
  }
  return streams;
}

// Steps launched one ahead of their collection. With fail_step >= 0 (eager), that step's first
// launch fails after `fail_after_layers` layers
// (CudaBackend::FailNextEagerStepAfterLayersForTesting) and it is launched again.
std::vector<std::vector<int32_t>> Pipelined(const ModelConfig& c, uint64_t seed, bool graphs,
                                            int fail_step = -1, int32_t fail_after_layers = 0) {
  Session r = Start(c, seed, graphs);
  std::vector<std::vector<int32_t>> streams(kSeqs);
  if (!r.backend) return streams;
  const std::vector<SamplingParams> params = Params();
  StepInput inputs[2];
  for (int step = 0; step <= kSteps; ++step) {
    if (step < kSteps) {
      inputs[step % 2] = BuildStep(r, step, params);
      if (step == fail_step) {
        r.backend->FailNextEagerStepAfterLayersForTesting(fail_after_layers);
        const absl::Status failed = r.backend->Launch(inputs[step % 2]);
        EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
      }
      const absl::Status launched = r.backend->Launch(inputs[step % 2]);
      EXPECT_TRUE(launched.ok()) << launched;
      if (!launched.ok()) return streams;
    }
    if (step == 0) {
      EXPECT_EQ(r.backend->Execute(inputs[0]).status().code(),
                absl::StatusCode::kFailedPrecondition);
    } else {
      absl::StatusOr<StepOutput> out = r.backend->Collect();  // step - 1
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return streams;
      EXPECT_EQ(out->graph_replayed, graphs) << "step " << step - 1;
      const std::vector<int> order = Order(step - 1);
      for (size_t k = 0; k < order.size(); ++k) {
        TestSeq& s = r.seqs[order[k]];
        // Fill in the stand-in pushed after that step's launch (below).
        s.tokens.back() = out->sampled[k].token_id;
        s.output.back() = out->sampled[k].token_id;
        streams[order[k]].push_back(out->sampled[k].token_id);
      }
    }
    if (step < kSteps) {
      // The next step's tokens are this step's samples, not known yet: stand-ins.
      const std::vector<int> order = Order(step);
      for (size_t k = 0; k < order.size(); ++k) {
        TestSeq& s = r.seqs[order[k]];
        s.tokens.push_back(PendingToken(static_cast<int32_t>(k)));
        s.output.push_back(PendingToken(static_cast<int32_t>(k)));
      }
    }
  }
  return streams;
}

// Steps as the engine runs them (engine/engine_impl.cc): launch step N, collect N - 1 if it is
// still in flight, then keep N in flight (stand-ins pushed for its samples) when every row of it
// chains (Backend::ChainsSample), else collect it at once. Sequence 2's penalties read its prompt
// of 30 tokens and its output: with max_penalty_tokens 32 its rows start on the device, chained,
// and cross to the host's CPU sampler at its third output token, whose last token is then a
// stand-in filled in before that step is collected.
Streams EngineLike(const ModelConfig& c, uint64_t seed, bool graphs) {
  Session r = Start(c, seed, graphs, /*max_penalty_tokens=*/32);
  Streams streams(kSeqs);
  if (!r.backend) return streams;
  const std::vector<SamplingParams> params = Params();
  const auto collect = [&](int step) {
    absl::StatusOr<StepOutput> out = r.backend->Collect();
    EXPECT_TRUE(out.ok()) << "step " << step << ": " << out.status();
    if (!out.ok()) return false;
    const std::vector<int> order = Order(step);
    for (size_t k = 0; k < order.size(); ++k) {
      TestSeq& s = r.seqs[order[k]];
      const int32_t t = out->sampled[k].token_id;
      if (!s.output.empty() && IsPendingToken(s.output.back())) {  // the step stayed in flight
        s.tokens.back() = s.output.back() = t;
      } else {
        s.tokens.push_back(t);
        s.output.push_back(t);
      }
      streams[order[k]].push_back(t);
    }
    return true;
  };
  StepInput inputs[2];
  int in_flight = -1;  // the step launched and not collected
  int chained = 0;
  for (int step = 0; step < kSteps; ++step) {
    const StepInput& in = inputs[step % 2] = BuildStep(r, step, params);
    const absl::Status launched = r.backend->Launch(in);
    EXPECT_TRUE(launched.ok()) << "step " << step << ": " << launched;
    if (!launched.ok() || (in_flight >= 0 && !collect(in_flight))) return streams;
    in_flight = -1;
    bool chains = true;
    for (const SampleRequest& sample : in.samples) {
      chains = chains && r.backend->ChainsSample(sample);
    }
    if (!chains) {
      if (!collect(step)) return streams;
      continue;
    }
    ++chained;
    in_flight = step;
    const std::vector<int> order = Order(step);
    for (size_t k = 0; k < order.size(); ++k) {
      r.seqs[order[k]].tokens.push_back(PendingToken(static_cast<int32_t>(k)));
      r.seqs[order[k]].output.push_back(PendingToken(static_cast<int32_t>(k)));
    }
  }
  if (in_flight >= 0) collect(in_flight);
  EXPECT_EQ(chained, 2) << "steps 0 and 1 chain, sequence 2's later rows do not";
  return streams;
}

// Runs `check(config, seed, graphs)` on the tiny and SmolLM2 shapes, eager and with graphs, from
// one fresh seed each.
template <typename Check>
void ForEachShapeAndMode(Check check) {
  for (const ModelConfig& c : {TinyConfig(), SmolLm2Config()}) {
    for (bool graphs : {false, true}) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(::testing::Message() << c.name << (graphs ? " graphs" : " eager") << " seed "
                                        << seed);
      check(c, seed, graphs);
    }
  }
}

// Equal streams, each of its sequence's length.
void ExpectEqualStreams(const Streams& got, const Streams& want) {
  for (int i = 0; i < kSeqs; ++i) {
    ASSERT_EQ(want[i].size(), static_cast<size_t>(i < kJoin ? kSteps : kSteps - kJoin));
    EXPECT_EQ(got[i], want[i]) << "sequence " << i;
  }
}

TEST(PipelinedStepsGpuTest, StreamsEqualSerialStepsGraphAndEager) {
  ForEachShapeAndMode([](const ModelConfig& c, uint64_t seed, bool graphs) {
    ExpectEqualStreams(Pipelined(c, seed, graphs), Serial(c, seed, graphs));
  });
}

// A launch that fails while the step before it is in flight (eager steps). Partway through its
// layers, as a launch or cuBLASLt error there would, the earlier step's samples still chain: the
// same step launched again gives the serial run's streams. Once its whole forward, sampler
// included, was queued, its sampler may have written the earlier step's chain tokens: a launch
// naming those samples is refused by name (before, it read whatever the failed step sampled),
// and the earlier step still collects the serial run's tokens.
TEST(PipelinedStepsGpuTest, AFailedLaunchKeepsTheChainOnlyWhereItCan) {
  for (const ModelConfig& c : {TinyConfig(), SmolLm2Config()}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(::testing::Message() << c.name << " seed " << seed);
    const Streams serial = Serial(c, seed, /*graphs=*/false);
    ExpectEqualStreams(Pipelined(c, seed, false, /*fail_step=*/2, /*fail_after_layers=*/1),
                       serial);
    Session r = Start(c, seed, /*graphs=*/false);
    ASSERT_TRUE(r.backend);
    const std::vector<SamplingParams> params = Params();
    const StepInput first = BuildStep(r, 0, params);
    ASSERT_TRUE(r.backend->Launch(first).ok());
    const std::vector<int> order = Order(0);
    for (size_t k = 0; k < order.size(); ++k) {
      r.seqs[order[k]].tokens.push_back(PendingToken(static_cast<int32_t>(k)));
      r.seqs[order[k]].output.push_back(PendingToken(static_cast<int32_t>(k)));
    }
    const StepInput second = BuildStep(r, 1, params);
    r.backend->FailNextEagerStepAfterLayersForTesting(c.num_layers);
    const absl::Status failed = r.backend->Launch(second);
    EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
    const absl::Status refused = r.backend->Launch(second);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(refused.message().find("followed by a launch that failed"), std::string::npos)
        << refused;
    absl::StatusOr<StepOutput> out = r.backend->Collect();
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->sampled.size(), order.size());
    for (size_t k = 0; k < order.size(); ++k) {
      EXPECT_EQ(out->sampled[k].token_id, serial[order[k]][0]) << "sequence " << order[k];
    }
  }
}

TEST(PipelinedStepsGpuTest, DevicePenaltiesEqualTheHostSampler) {
  int changed = 0;  // streams the penalties changed (or the test could not tell)
  ForEachShapeAndMode([&](const ModelConfig& c, uint64_t seed, bool graphs) {
    const Streams device = Serial(c, seed, graphs);
    ExpectEqualStreams(device, Serial(c, seed, graphs, Penalties::kOnHost));
    const Streams none = Serial(c, seed, graphs, Penalties::kNone);
    for (int i = 0; i < kSeqs; ++i) changed += device[i] != none[i];
  });
  EXPECT_GT(changed, 0);
}

// Top-n logprobs from the device against the CPU sampler's on the same logits rows: sequences 0
// and 3 are penalized, so kOnHost samples them on the host. Ids equal in the CPU's order,
// logprobs within 1e-4; sequence 1 (greedy, on the device in both) gets kMaxTopLogprobs entries
// led by its token, in non-increasing order, and the same bits in both runs.
TEST(PipelinedStepsGpuTest, TopLogprobsEqualTheHostSamplers) {
  ForEachShapeAndMode([](const ModelConfig& c, uint64_t seed, bool graphs) {
    Samples device, host;
    Serial(c, seed, graphs, Penalties::kOnDevice, &device);
    Serial(c, seed, graphs, Penalties::kOnHost, &host);
    const std::vector<SamplingParams> params = Params();
    for (int i = 0; i < kSeqs; ++i) {
      ASSERT_EQ(device[i].size(), host[i].size());
      for (size_t t = 0; t < device[i].size(); ++t) {
        SCOPED_TRACE(::testing::Message() << "sequence " << i << " token " << t);
        const SampledToken &d = device[i][t], &h = host[i][t];
        EXPECT_EQ(d.token_id, h.token_id);
        ASSERT_EQ(d.top.size(), static_cast<size_t>(params[i].logprobs));
        ASSERT_EQ(h.top.size(), d.top.size());
        for (size_t j = 0; j < d.top.size(); ++j) {
          EXPECT_EQ(d.top[j].token_id, h.top[j].token_id) << "entry " << j;
          EXPECT_NEAR(d.top[j].logprob, h.top[j].logprob, 1e-4) << "entry " << j;
          if (j > 0) {
            EXPECT_LE(d.top[j].logprob, d.top[j - 1].logprob) << "entry " << j;
          }
        }
        if (i == 1) {
          EXPECT_EQ(d.top[0].token_id, d.token_id);
          EXPECT_EQ(d.top[0].logprob, d.logprob);
          EXPECT_EQ(std::memcmp(&d.top[5].logprob, &h.top[5].logprob, sizeof(float)), 0);
        }
      }
    }
  });
}

TEST(PipelinedStepsGpuTest, RowsCrossingThePenaltyLimitMidStreamAsTheEngineRunsThem) {
  ForEachShapeAndMode([](const ModelConfig& c, uint64_t seed, bool graphs) {
    ExpectEqualStreams(EngineLike(c, seed, graphs), Serial(c, seed, graphs, Penalties::kOnHost));
  });
}

// The request's sizes decide: penalties over more tokens than max_penalty_tokens are sampled
// on the host (and do not chain); top-n logprobs chain.
TEST(PipelinedStepsGpuTest, ChainsPenaltiesUpToTheirTokenLimit) {
  const ModelConfig c = TinyConfig();
  std::unique_ptr<CudaBackend> backend =
      MakeCudaBackend(c, FreshSeed(), {.graphs = false, .max_penalty_tokens = 4096});
  ASSERT_TRUE(backend);
  SamplingParams penalty;
  penalty.repetition_penalty = 1.3f;
  const std::vector<int32_t> tokens(4096 + 1, 3);
  SampleRequest r{0, &penalty, std::span<const int32_t>(tokens).first(4000),
                  std::span<const int32_t>(tokens).first(96), 0};
  EXPECT_TRUE(backend->ChainsSample(r));  // 4096 tokens: the limit
  r.output = std::span<const int32_t>(tokens).first(97);
  EXPECT_FALSE(backend->ChainsSample(r));
  r.output = {};
  SamplingParams logprobs;  // top-n logprobs come back from the device
  logprobs.logprobs = kernels::kMaxTopLogprobs;
  r.params = &logprobs;
  EXPECT_TRUE(backend->ChainsSample(r));
}

TEST(PipelinedStepsGpuTest, RefusesStandInsForHostSampledRowsAndAThirdStep) {
  const ModelConfig c = TinyConfig();
  const uint64_t seed = FreshSeed();
  Session r = Start(c, seed, /*graphs=*/true, /*max_penalty_tokens=*/0);
  ASSERT_TRUE(r.backend);
  SamplingParams on_host;
  on_host.temperature = 0.0f;
  on_host.repetition_penalty = 1.3f;  // sampled on the host in Collect
  SamplingParams greedy;
  greedy.temperature = 0.0f;

  StepBuilder b0(kTestBlockSize, &r.next_block);
  b0.Add(r.seqs[0], 1, &on_host);
  const StepInput first = b0.Build(true);
  ASSERT_TRUE(r.backend->Launch(first).ok());
  r.seqs[0].tokens.push_back(PendingToken(0));
  r.seqs[0].output.push_back(PendingToken(0));
  StepBuilder b1(kTestBlockSize, &r.next_block);
  b1.Add(r.seqs[0], 1, &greedy);
  const StepInput second = b1.Build(true);
  const absl::Status refused = r.backend->Launch(second);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  ASSERT_TRUE(r.backend->Collect().ok());
  const absl::Status named = r.backend->Launch(second);
  EXPECT_EQ(named.code(), absl::StatusCode::kInvalidArgument) << named;
  EXPECT_NE(named.message().find("token_ids[0] = -1 names sample 0"), std::string::npos) << named;

  // Greedy steps chain; a third launch is refused while two are in flight.
  StepBuilder b2(kTestBlockSize, &r.next_block), b3(kTestBlockSize, &r.next_block),
      b4(kTestBlockSize, &r.next_block);
  b2.Add(r.seqs[1], 1, &greedy);
  b3.Add(r.seqs[2], 1, &greedy);
  b4.Add(r.seqs[1], 1, &greedy);
  const StepInput s2 = b2.Build(true), s3 = b3.Build(true), s4 = b4.Build(true);
  ASSERT_TRUE(r.backend->Launch(s2).ok());
  ASSERT_TRUE(r.backend->Launch(s3).ok());
  EXPECT_EQ(r.backend->Launch(s4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(r.backend->Collect().ok());
  EXPECT_TRUE(r.backend->Collect().ok());
  EXPECT_EQ(r.backend->Collect().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace rtgen::testing_gpu
