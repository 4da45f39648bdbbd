#include "tools/engine_bench_timing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/pending_token.h"
#include "tools/host_clock.h"
#include "tools/median.h"

namespace rtgen::tools {

namespace {

// A decode step of the batch samples every sequence, in order.
absl::Status CheckRows(const StepOutput& out, int32_t batch_size) {
  if (out.sampled.size() != static_cast<size_t>(batch_size)) {
    return absl::InternalError(absl::StrCat("a decode step of ", batch_size, " sequences sampled ",
                                            out.sampled.size(), " rows"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrefillBatch(Backend& backend, BenchBatch& batch, int32_t count, int32_t prompt,
                          int32_t vocab, const SeqTokens* tokens) {
  const int32_t per_step = std::max(1, kBenchMaxNumTokens / prompt);
  for (int32_t first = 0; first < count; first += per_step) {
    const int32_t n = std::min(per_step, count - first);
    StepInput step = batch.Step(first, n, 0, prompt, vocab);
    if (tokens != nullptr) {
      for (int32_t q = 0; q < n; ++q) step.samples[q].prompt = tokens->prompts[first + q];
    }
    ASSIGN_OR_RETURN(StepOutput out, backend.Execute(step));
    RETURN_IF_ERROR(batch.Take(out, first, vocab));
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodeResult> TimeDecode(Backend& backend, const ModelConfig& config,
                                        const EngineBenchOptions& o, int32_t batch_size,
                                        int32_t built_repeats, bool pipelined,
                                        const DecodeStepTrace& trace,
                                        const TimedWindow& window) {
  BenchBatch batch(batch_size, DecodeBlocksPerSeq(o), o.seed,
                   BenchSampling(o.penalties, o.logprobs));
  SeqTokens seq_tokens(batch, o.prompt, o.steps, config.vocab_size);
  RETURN_IF_ERROR(
      PrefillBatch(backend, batch, batch_size, o.prompt, config.vocab_size, &seq_tokens));
  const std::vector<int32_t> first_tokens = batch.last();
  DecodeResult r;
  r.graph_replayed = true;
  // One run: restart at position `prompt` from the prefill's tokens; `prebuilt` builds all step
  // inputs before the clock starts and only patches their token ids inside the loop.
  auto run = [&](int32_t steps, bool prebuilt, std::vector<int32_t>* tokens)
      -> absl::StatusOr<double> {
    std::vector<StepInput> inputs;
    for (int32_t i = 0; prebuilt && i < steps; ++i) {
      inputs.push_back(batch.Step(0, batch_size, o.prompt + i, 1, config.vocab_size));
    }
    std::vector<int32_t> last = first_tokens;
    seq_tokens.Restart(first_tokens);
    const double t0 = Now();
    for (int32_t i = 0; i < steps; ++i) {
      StepInput built;
      if (!prebuilt) built = batch.Step(0, batch_size, o.prompt + i, 1, config.vocab_size);
      StepInput& in = prebuilt ? inputs[i] : built;
      std::copy(last.begin(), last.end(), in.token_ids.begin());
      seq_tokens.Name(in);
      ASSIGN_OR_RETURN(StepOutput out, backend.Execute(in));
      RETURN_IF_ERROR(CheckRows(out, batch_size));
      for (int32_t s = 0; s < batch_size; ++s) {
        last[s] = out.sampled[s].token_id;
        if (last[s] < 0 || last[s] >= config.vocab_size) {
          return absl::InternalError(absl::StrCat("decode sampled token ", last[s]));
        }
        seq_tokens.outputs[s].push_back(last[s]);
      }
      r.graph_replayed = r.graph_replayed && out.graph_replayed;
      if (tokens) tokens->insert(tokens->end(), last.begin(), last.end());
    }
    return (Now() - t0) * 1e3 / steps;
  };
  // Pipelined: at most two steps in flight; step i's tokens are step i-1's samples (seq s is
  // sample s of every step), given as stand-ins and read on the device.
  auto run_pipelined = [&](int32_t steps, std::vector<int32_t>* tokens) -> absl::StatusOr<double> {
    std::vector<StepInput> inputs;
    for (int32_t i = 0; i < steps; ++i) {
      inputs.push_back(batch.Step(0, batch_size, o.prompt + i, 1, config.vocab_size));
      for (int32_t s = 0; s < batch_size; ++s) {
        inputs.back().token_ids[s] = i == 0 ? first_tokens[s] : PendingToken(s);
      }
    }
    seq_tokens.Restart(first_tokens);
    // Step j's tokens: output j + 1 of each sequence, a stand-in until collected.
    auto collect = [&](int32_t j) -> absl::Status {
      ASSIGN_OR_RETURN(StepOutput out, backend.Collect());
      RETURN_IF_ERROR(CheckRows(out, batch_size));
      for (int32_t s = 0; s < batch_size; ++s) {
        const int32_t t = out.sampled[s].token_id;
        if (t < 0 || t >= config.vocab_size) {
          return absl::InternalError(absl::StrCat("pipelined decode sampled token ", t));
        }
        if (tokens) tokens->push_back(t);
        std::vector<int32_t>& output = seq_tokens.outputs[s];
        if (output.size() > static_cast<size_t>(j + 1)) {
          output[j + 1] = t;
        } else {
          output.push_back(t);
        }
      }
      r.graph_replayed = r.graph_replayed && out.graph_replayed;
      return absl::OkStatus();
    };
    const double t0 = Now();
    for (int32_t i = 0; i < steps; ++i) {
      if (i > 0) {
        for (int32_t s = 0; s < batch_size; ++s) {
          seq_tokens.outputs[s].push_back(PendingToken(s));
        }
      }
      seq_tokens.Name(inputs[i]);
      RETURN_IF_ERROR(backend.Launch(inputs[i]));
      if (i > 0) RETURN_IF_ERROR(collect(i - 1));
    }
    RETURN_IF_ERROR(collect(steps - 1));
    return (Now() - t0) * 1e3 / steps;
  };
  RETURN_IF_ERROR(run(std::min(16, o.steps), true, nullptr).status());  // warm-up
  if (pipelined) RETURN_IF_ERROR(run_pipelined(std::min(16, o.steps), nullptr).status());
  std::vector<double> prebuilt, built, piped;
  std::vector<int32_t> piped_tokens;
  if (window.start) window.start();
  for (int32_t rep = 0; rep < std::max(o.repeats, built_repeats); ++rep) {
    if (rep < o.repeats) {
      ASSIGN_OR_RETURN(double a, run(o.steps, true, rep == 0 ? &r.tokens : nullptr));
      prebuilt.push_back(a);
      if (pipelined) {
        ASSIGN_OR_RETURN(double p, run_pipelined(o.steps, rep == 0 ? &piped_tokens : nullptr));
        piped.push_back(p);
      }
    }
    if (rep < built_repeats) {
      ASSIGN_OR_RETURN(double c, run(o.steps, false, nullptr));
      built.push_back(c);
    }
  }
  if (window.stop) window.stop();
  if (trace) {
    RETURN_IF_ERROR(trace([&]() { return run(1, true, nullptr).status(); }));
  }
  r.tpot_ms = Median(prebuilt);
  if (!built.empty()) r.tpot_built_ms = Median(built);
  if (pipelined) {
    r.tpot_pipelined_ms = Median(piped);
    size_t same = 0;
    for (size_t k = 0; k < piped_tokens.size() && k < r.tokens.size(); ++k) {
      same += piped_tokens[k] == r.tokens[k];
    }
    r.pipelined_tokens_equal =
        r.tokens.empty() ? 0.0 : static_cast<double>(same) / static_cast<double>(r.tokens.size());
  }
  return r;
}

absl::StatusOr<double> TimeTtft(Backend& backend, const ModelConfig& config,
                                const EngineBenchOptions& o, int32_t prompt) {
  BenchBatch batch(1, TtftBlocks(prompt), o.seed + prompt,
                   BenchSampling(o.penalties, o.logprobs));
  const SeqTokens tokens(batch, prompt, 0, config.vocab_size);  // penalties: over the prompt
  std::vector<double> ms;
  for (int32_t rep = 0; rep <= o.ttft_repeats; ++rep) {
    StepInput in = batch.Step(0, 1, 0, prompt, config.vocab_size);  // built before the clock,
    tokens.Name(in);                                                // as TimeMixed's
    const double t0 = Now();
    ASSIGN_OR_RETURN(StepOutput out, backend.Execute(in));
    const double t = (Now() - t0) * 1e3;
    RETURN_IF_ERROR(batch.Take(out, 0, config.vocab_size));
    if (rep > 0) ms.push_back(t);  // rep 0 warms up this prompt length
  }
  return Median(ms);
}

absl::StatusOr<double> TimeMixed(Backend& backend, const ModelConfig& config,
                                 const EngineBenchOptions& o, int32_t decode, int32_t prompt) {
  const int32_t vocab = config.vocab_size;
  BenchBatch batch(decode + 1, MixedBlocksPerSeq(o), o.seed + 31 * decode + prompt,
                   BenchSampling(o.penalties, o.logprobs));
  // Penalties read each sequence's tokens so far: a decode row's prompt and the token its prefill
  // sampled, the prompt row's `prompt` tokens.
  SeqTokens tokens(batch, o.prompt, 1, vocab);
  tokens.prompts[decode].clear();
  for (int32_t p = 0; p < prompt; ++p) {
    tokens.prompts[decode].push_back(batch.PromptToken(decode, p, vocab));
  }
  RETURN_IF_ERROR(PrefillBatch(backend, batch, decode, o.prompt, vocab, &tokens));
  tokens.Restart(batch.last());
  tokens.outputs[decode].clear();
  std::vector<double> ms;
  for (int32_t rep = 0; rep <= o.ttft_repeats; ++rep) {
    StepInput in = JoinSteps(batch.Step(0, decode, o.prompt, 1, vocab),
                             batch.Step(decode, 1, 0, prompt, vocab));
    tokens.Name(in);
    const double t0 = Now();
    ASSIGN_OR_RETURN(StepOutput out, backend.Execute(in));
    const double t = (Now() - t0) * 1e3;
    if (out.sampled.size() != static_cast<size_t>(decode + 1)) {
      return absl::InternalError("a mixed step sampled the wrong number of rows");
    }
    if (rep > 0) ms.push_back(t);  // rep 0 warms up this shape
  }
  return Median(ms);
}

}  // namespace rtgen::tools
