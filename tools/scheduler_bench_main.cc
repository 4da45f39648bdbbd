// rtgen-scheduler-bench: cost of one engine step's CPU bookkeeping (Scheduler::Schedule +
// Scheduler::Postprocess, optionally + BuildStepInput) with 256 running decodes. Target: ≤ 50 µs.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "engine/tokenizer/tokenizer.h"
#include "tools/target_verdict.h"

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
  StepInput input;  // reused across steps, as the engine does
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
      BuildStepInput(batch, kBlockSize, &input);
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

constexpr double kTargetMicros = 50.0;

// The console table, plus each run handed to the verdict against the target.
class TargetReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      tools::BenchRunRecord record;
      record.name = run.run_name.function_name;
      record.aggregate = run.run_type == Run::RT_Aggregate;
      record.aggregate_name = run.aggregate_name;
      record.repetitions = run.repetitions;
      record.error = run.error_occurred;
      record.error_message = run.error_message;
      record.cpu_us = run.GetAdjustedCPUTime() * MicrosPerUnit(run.time_unit);
      record.real_us = run.GetAdjustedRealTime() * MicrosPerUnit(run.time_unit);
      verdict_.Add(record);
    }
  }

  // Prints one line per benchmark against the target; false when the headline step misses it
  // or failed.
  bool PrintVerdict() const {
    std::printf("\nper-step cost at %d running decodes (target <= %.0f us CPU; headline: the "
                "scheduler + block manager step):\n%s",
                kNumSeqs, kTargetMicros, verdict_.Report().c_str());
    std::printf("  (wall time includes waiting for a CPU on a shared machine; CPU time is the "
                "step's cost)\n");
    return verdict_.Passes();
  }

 private:
  static double MicrosPerUnit(benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond: return 1e-3;
      case benchmark::kMicrosecond: return 1.0;
      case benchmark::kMillisecond: return 1e3;
      case benchmark::kSecond: return 1e6;
    }
    return 1.0;
  }
  tools::TargetVerdict verdict_{"BM_ScheduleAndPostprocess", kTargetMicros};
};

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  rtgen::TargetReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.PrintVerdict() ? 0 : 1;
}
