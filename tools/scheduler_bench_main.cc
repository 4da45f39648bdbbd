// rtgen-scheduler-bench: cost of one engine step's CPU bookkeeping (Scheduler::Schedule +
// Scheduler::Postprocess, optionally + BuildStepInput) with 256 running decodes. Target: ≤ 50 µs.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "engine/tokenizer/tokenizer.h"

namespace rtgen {
namespace {

constexpr int32_t kNumSeqs = 256;
constexpr int32_t kPromptLen = 32;
constexpr int32_t kMaxNew = 2048;  // steps before the state is rebuilt
constexpr int32_t kBlockSize = 16;

// One token per byte; enough for the detokenizer on the hot path.
class ByteTokenizer : public Tokenizer {
 public:
  ByteTokenizer() {
    vocab_size_ = 256;
    eos_id_ = 0;
    stop_ids_ = {0};
  }
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string TokenBytes(int32_t id) const override {
    return id > 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "";
  }
};

struct State {
  explicit State(const Tokenizer* tok, bool stop_strings) {
    SchedulerConfig config;
    config.max_num_seqs = kNumSeqs;
    config.max_num_batched_tokens = 8192;
    config.max_model_len = kPromptLen + kMaxNew + 1;
    config.block_size = kBlockSize;
    config.num_kv_blocks = kNumSeqs * ((config.max_model_len + kBlockSize - 1) / kBlockSize);
    scheduler = std::make_unique<Scheduler>(config, tok, nullptr);
    for (int32_t i = 0; i < kNumSeqs; ++i) {
      Request r;
      r.id = "bench-" + std::to_string(i);
      for (int32_t t = 0; t < kPromptLen; ++t) r.prompt_tokens.push_back(1 + (i * 31 + t) % 250);
      r.sampling.temperature = 0.0f;
      r.stopping.max_tokens = kMaxNew;
      r.stopping.ignore_eos = true;
      if (stop_strings) r.stopping.stop = {"</answer>", "\n\n"};
      scheduler->Add(std::make_unique<Sequence>(std::move(r), [](StreamChunk) {}, tok, 1, i));
    }
    sampled.resize(kNumSeqs);
    for (int32_t i = 0; i < kNumSeqs; ++i) sampled[static_cast<size_t>(i)].token_id = 'a' + i % 26;
    // Prefill step: afterwards every sequence is a running decode.
    ScheduledBatch batch = scheduler->Schedule(absl::Now());
    scheduler->Postprocess(batch, sampled, absl::Now());
  }
  std::unique_ptr<Scheduler> scheduler;
  std::vector<SampledToken> sampled;
};

void RunSteps(benchmark::State& state, bool build_input, bool stop_strings) {
  ByteTokenizer tok;
  auto s = std::make_unique<State>(&tok, stop_strings);
  int32_t steps = 0;
  for (auto _ : state) {
    if (++steps == kMaxNew - 2) {
      state.PauseTiming();
      s = std::make_unique<State>(&tok, stop_strings);
      steps = 0;
      state.ResumeTiming();
    }
    const absl::Time now = absl::Now();
    ScheduledBatch batch = s->scheduler->Schedule(now);
    if (build_input) {
      StepInput input = BuildStepInput(batch, kBlockSize);
      benchmark::DoNotOptimize(input.slot_mapping.data());
    }
    s->scheduler->Postprocess(batch, s->sampled, now);
    if (batch.num_decodes != kNumSeqs) state.SkipWithError("not a full decode batch");
  }
  state.counters["seqs"] = kNumSeqs;
}

void BM_ScheduleAndPostprocess(benchmark::State& state) { RunSteps(state, false, false); }
void BM_StepWithInputBuild(benchmark::State& state) { RunSteps(state, true, false); }
void BM_StepWithStopStrings(benchmark::State& state) { RunSteps(state, true, true); }

BENCHMARK(BM_ScheduleAndPostprocess)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepWithInputBuild)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StepWithStopStrings)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rtgen

BENCHMARK_MAIN();
