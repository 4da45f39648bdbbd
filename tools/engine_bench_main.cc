// rtgen-engine-bench: decode speed of the CUDA backend at real model shapes (random bf16 weights
// drawn on the device), next to the memory-bandwidth floor, graphs vs eager, TTFT and start-up.
//
//   rtgen-engine-bench [--models smollm2-135m,llama3.2-1b,llama3-8b] [--batches 1,8,32,64,128,256]
//                      [--prompt 128] [--steps 128] [--repeats 5] [--built-repeats 3]
//                      [--ttft-repeats 5]
//                      [--ttft-prompts 128,2048] [--no-eager] [--max-model-len 4096]
//                      [--seed 1] [--device 0] [--json FILE] [--kernel-trace]
//                      [--penalties] [--max-penalty-tokens N] [--logprobs N]
//
// Per model and batch: every sequence is prefilled with `prompt` random tokens through Execute
// (prefill steps), then `steps` greedy decode steps run through Execute (context prompt+1 ..
// prompt+steps). A repeat restarts the decode at position `prompt` over the same prefilled KV.
// TPOT is a repeat's wall time (host clock; Execute waits for its step) over `steps`, median of
// the repeats, in two variants: step inputs prebuilt before the clock starts (the backend's own
// host work stays in: filling its pinned step buffers and the upload/download), and, with
// graphs only, inputs built inside the loop (what a serving loop pays on top). With graphs a
// third variant pipelines the prebuilt steps as the engine's async scheduling does: step i+1 is
// launched before step i is collected, its tokens PendingToken stand-ins read on the device
// (its greedy tokens must equal the serial run's). The floor is the
// bytes a decode step must read (weights, minus the embedding table when untied, plus the
// batch's KV) over the measured device-to-device copy bandwidth (bytes read + written, median
// of 10 copies). --kernel-trace (a build configured with -DRTGEN_KERNEL_TRACE=ON) prints, after
// each graph decode timing, the timeline of one more decode step's kernels
// (kernels/kernel_trace.h). --penalties samples greedily after repetition 1.1, presence 0.3 and
// frequency 0.2 penalties over each sequence's prompt and output (on the device unless
// --max-penalty-tokens is below prompt + steps, 0: always on the host, where rows do not
// chain and the pipelined variant is skipped). --logprobs N has every row return its top N
// logprobs (0..kernels::kMaxTopLogprobs = 20, on the device). Each batch's decode timings (graph
// and eager) print what the GPU ran at meanwhile (SM clock, power, share of samples power-capped;
// tools/gpu_telemetry.h), where the driver's NVML is there to ask; the JSON rows carry it too.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/pending_token.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/kernel_trace.h"
#include "kernels/random_fill.h"
#include "kernels/random_weights.h"
#include "kernels/sample_penalties.h"
#include "kernels/sample_row_params.h"
#include "tools/copy_bandwidth.h"
#include "tools/gpu_telemetry.h"
#include "tools/median.h"
#include "nlohmann/json.hpp"

namespace rtgen {
namespace {

using tools::Median;
using tools::MeasureCopyBandwidth;

using Json = nlohmann::ordered_json;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kMaxNumTokens = 4096;  // per step: prefill chunks of whole prompts, TTFT

struct Options {
  std::vector<std::string> models = {"smollm2-135m", "llama3.2-1b", "llama3-8b"};
  std::vector<int32_t> batches = {1, 8, 32, 64, 128, 256};
  std::vector<int32_t> ttft_prompts = {128, 2048};
  // Mixed steps timed: {decode rows, prompt tokens} (--mixed D:P,...).
  std::vector<std::pair<int32_t, int32_t>> mixed;
  int32_t prompt = 128;
  int32_t steps = 128;
  int32_t repeats = 5;
  int32_t built_repeats = 3;  // runs with step inputs built inside the timed loop
  int32_t ttft_repeats = 5;
  int32_t max_model_len = 4096;
  bool eager = true;
  bool kernel_trace = false;
  bool penalties = false;
  int32_t logprobs = 0;  // top-n logprobs every row asks for
  int32_t max_penalty_tokens = CudaBackendOptions{}.max_penalty_tokens;
  bool help = false;
  uint64_t seed = 1;
  int32_t device = 0;
  std::string json_path;
};

absl::StatusOr<ModelConfig> Shape(const std::string& name) {
  ModelConfig c;
  c.name = name;
  c.rms_norm_eps = 1e-5f;
  if (name == "smollm2-135m") {
    c.vocab_size = 49152, c.hidden_size = 576, c.intermediate_size = 1536, c.num_layers = 30;
    c.num_heads = 9, c.num_kv_heads = 3, c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0f, c.tie_word_embeddings = true;
  } else if (name == "llama3.2-1b") {
    c.vocab_size = 128256, c.hidden_size = 2048, c.intermediate_size = 8192, c.num_layers = 16;
    c.num_heads = 32, c.num_kv_heads = 8, c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0f, c.tie_word_embeddings = true;
    c.rope_scaling = Llama3RopeScaling{32.0f, 1.0f, 4.0f, 8192};
  } else if (name == "llama3-8b") {
    c.vocab_size = 128256, c.hidden_size = 4096, c.intermediate_size = 14336, c.num_layers = 32;
    c.num_heads = 32, c.num_kv_heads = 8, c.max_position_embeddings = 8192;
    c.rope_theta = 500000.0f, c.tie_word_embeddings = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--models: unknown model '", name, "' (smollm2-135m, llama3.2-1b, llama3-8b)"));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  RETURN_IF_ERROR(c.Validate());
  return c;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<Json> DeviceInfo(int32_t device) {
  cudaDeviceProp p{};
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&p, device));
  int driver = 0, runtime = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime));
  size_t free_bytes = 0, total = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total));
  auto version = [](int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); };
  return Json{{"name", p.name},
              {"compute_capability", absl::StrCat(p.major, ".", p.minor)},
              {"sms", p.multiProcessorCount},
              {"memory_gib", static_cast<double>(total) / (1 << 30)},
              {"free_gib_at_start", static_cast<double>(free_bytes) / (1 << 30)},
              {"driver", version(driver)},
              {"runtime", version(runtime)},
              {"cublaslt", static_cast<int64_t>(cublasLtGetVersion())}};
}

// Every row's sampling: greedy, after repetition 1.1, presence 0.3 and frequency 0.2 penalties
// with --penalties, returning its top `logprobs` logprobs.
SamplingParams BenchSampling(bool penalties, int32_t logprobs = 0) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = logprobs;
  if (penalties) {
    p.repetition_penalty = 1.1f;
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;
  }
  return p;
}

// Whether the backend samples some decode row's penalties on the host (its rule, at the longest
// output of a run: `steps` tokens after the prompt); such rows do not chain.
bool PenaltiesOnHost(const Options& o) {
  return o.penalties && !kernels::PenalizesOnDevice(BenchSampling(true), o.prompt, o.steps,
                                                    o.max_penalty_tokens);
}

// KV blocks each sequence of a mixed step owns (TimeMixed): a decode row's prompt and one more
// token, or the longest new prompt.
int32_t MixedBlocksPerSeq(const Options& o) {
  int32_t tokens = o.prompt + 1;
  for (const auto& [decode, prompt] : o.mixed) tokens = std::max(tokens, prompt);
  return (tokens + kBlockSize - 1) / kBlockSize;
}

// Sequences of one batch: sequence i owns blocks [i * blocks_per_seq, (i + 1) * blocks_per_seq).
class Batch {
 public:
  Batch(int32_t size, int32_t blocks_per_seq, uint64_t seed,
        const SamplingParams& params = BenchSampling(false))
      : size_(size),
        blocks_per_seq_(blocks_per_seq),
        last_(size),
        seed_(seed),
        params_(params) {}

  // Prompt token p of sequence s (the ids a prefill step gets).
  int32_t PromptToken(int32_t s, int32_t p, int32_t vocab) const {
    const uint64_t h = (seed_ + 0x9e3779b97f4a7c15ull * (s * 65536ull + p)) >> 17;
    return static_cast<int32_t>(h % vocab);
  }

  // One step: sequences [first, first + count), each `len` tokens starting at position `start`
  // (len 1 for all: a decode step). Token ids: the last sampled token (decode) or seeded ids.
  StepInput Step(int32_t first, int32_t count, int32_t start, int32_t len, int32_t vocab) const {
    StepInput in;
    in.max_blocks_per_seq = blocks_per_seq_;
    in.is_decode_only = len == 1;
    in.query_start.push_back(0);
    for (int32_t q = 0; q < count; ++q) {
      const int32_t s = first + q;
      for (int32_t p = start; p < start + len; ++p) {
        in.token_ids.push_back(len == 1 ? last_[s] : PromptToken(s, p, vocab));
        in.positions.push_back(p);
        in.slot_mapping.push_back((s * blocks_per_seq_ + p / kBlockSize) * kBlockSize +
                                  p % kBlockSize);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.context_lens.push_back(start + len);
      for (int32_t j = 0; j < blocks_per_seq_; ++j) {
        in.block_tables.push_back(s * blocks_per_seq_ + j);
      }
      in.samples.push_back(SampleRequest{q, &params_, {}, {}, seed_});
    }
    return in;
  }

  // Records the sampled tokens of a step over sequences [first, ...); checks their range.
  absl::Status Take(const StepOutput& out, int32_t first, int32_t vocab) {
    for (size_t i = 0; i < out.sampled.size(); ++i) {
      const int32_t t = out.sampled[i].token_id;
      if (t < 0 || t >= vocab) {
        return absl::InternalError(absl::StrCat("sampled token ", t, " is outside the vocab"));
      }
      const std::vector<TokenLogprob>& top = out.sampled[i].top;
      if (static_cast<int32_t>(top.size()) != params_.logprobs ||
          (!top.empty() && top[0].token_id != t)) {
        return absl::InternalError(absl::StrCat("sampled token ", t, " came with ", top.size(),
                                                " top logprobs (asked for ", params_.logprobs,
                                                "), not led by it"));
      }
      last_[first + i] = t;
    }
    return absl::OkStatus();
  }

  int32_t size() const { return size_; }
  const std::vector<int32_t>& last() const { return last_; }

 private:
  int32_t size_;
  int32_t blocks_per_seq_;
  std::vector<int32_t> last_;
  uint64_t seed_;
  SamplingParams params_;  // greedy (BenchSampling)
};

// Each sequence's prompt and output tokens, which a decode step's samples name (penalties read
// them): outputs start from the prefill's tokens; reserved, so the spans stay valid.
struct SeqTokens {
  std::vector<std::vector<int32_t>> prompts, outputs;

  SeqTokens(const Batch& batch, int32_t prompt, int32_t steps, int32_t vocab)
      : prompts(batch.size()), outputs(batch.size()) {
    for (int32_t s = 0; s < batch.size(); ++s) {
      for (int32_t p = 0; p < prompt; ++p) prompts[s].push_back(batch.PromptToken(s, p, vocab));
      outputs[s].reserve(steps + 2);
    }
  }
  void Restart(const std::vector<int32_t>& first) {
    for (size_t s = 0; s < outputs.size(); ++s) outputs[s].assign(1, first[s]);
  }
  // Points the step's samples (sequence s is sample s) at the tokens so far.
  void Name(StepInput& in) const {
    for (size_t s = 0; s < in.samples.size(); ++s) {
      in.samples[s].prompt = prompts[s];
      in.samples[s].output = outputs[s];
    }
  }
};

// Prefills the `prompt`-token prompts of the batch's sequences [0, count), as many whole prompts
// a step as kMaxNumTokens holds; their samples read `tokens`' prompts (penalties) when given.
absl::Status PrefillBatch(CudaBackend& backend, Batch& batch, int32_t count, int32_t prompt,
                          int32_t vocab, const SeqTokens* tokens) {
  const int32_t per_step = std::max(1, kMaxNumTokens / prompt);
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

struct DecodeResult {
  double tpot_ms = 0.0;          // inputs prebuilt
  double tpot_built_ms = 0.0;    // inputs built inside the loop
  double tpot_pipelined_ms = 0.0;  // inputs prebuilt, step i+1 launched before i is collected
  double pipelined_tokens_equal = 0.0;  // fraction of the pipelined run's tokens equal to serial
  std::vector<int32_t> tokens;   // every sequence's tokens of the first timed run, step-major
  bool graph_replayed = false;   // every step of every run replayed a graph
};

// Prefills the batch, then times decode runs (see the file comment).
absl::StatusOr<DecodeResult> TimeDecode(CudaBackend& backend, const ModelConfig& config,
                                        const Options& o, int32_t batch_size,
                                        int32_t built_repeats, bool pipelined) {
  const int32_t bps = (o.prompt + o.steps + kBlockSize - 1) / kBlockSize;
  Batch batch(batch_size, bps, o.seed, BenchSampling(o.penalties, o.logprobs));
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
  if (o.kernel_trace && pipelined) {  // graphs: one more step, its kernels' timeline
    RETURN_IF_ERROR(kernels::KernelTraceBegin());
    RETURN_IF_ERROR(run(1, true, nullptr).status());
    ASSIGN_OR_RETURN(std::vector<kernels::KernelSpan> spans, kernels::KernelTraceEnd());
    std::printf("kernel timeline of one decode step, %s batch %d (us):\n%s", config.name.c_str(),
                batch_size, kernels::FormatKernelTimeline(spans).c_str());
  }
  r.tpot_ms = Median(prebuilt);
  r.tpot_built_ms = Median(built);
  r.tpot_pipelined_ms = Median(piped);
  size_t same = 0;
  for (size_t k = 0; k < piped_tokens.size() && k < r.tokens.size(); ++k) {
    same += piped_tokens[k] == r.tokens[k];
  }
  r.pipelined_tokens_equal =
      r.tokens.empty() ? 0.0 : static_cast<double>(same) / static_cast<double>(r.tokens.size());
  return r;
}

// Batch-1 TTFT: one prefill step of `prompt` tokens that samples the first token, median.
absl::StatusOr<double> TimeTtft(CudaBackend& backend, const ModelConfig& config,
                                const Options& o, int32_t prompt) {
  Batch batch(1, (prompt + kBlockSize) / kBlockSize, o.seed + prompt);
  std::vector<double> ms;
  for (int32_t rep = 0; rep <= o.ttft_repeats; ++rep) {
    const double t0 = Now();
    ASSIGN_OR_RETURN(StepOutput out, backend.Execute(batch.Step(0, 1, 0, prompt,
                                                                config.vocab_size)));
    const double t = (Now() - t0) * 1e3;
    RETURN_IF_ERROR(batch.Take(out, 0, config.vocab_size));
    if (rep > 0) ms.push_back(t);  // rep 0 warms up this prompt length
  }
  return Median(ms);
}

// Joins two steps' sequences into one (b's after a's): a mixed step when one decodes.
StepInput Join(StepInput a, const StepInput& b) {
  const int32_t tokens = a.num_tokens(), seqs = a.num_seqs();
  a.is_decode_only = a.is_decode_only && b.is_decode_only;
  a.token_ids.insert(a.token_ids.end(), b.token_ids.begin(), b.token_ids.end());
  a.positions.insert(a.positions.end(), b.positions.begin(), b.positions.end());
  a.slot_mapping.insert(a.slot_mapping.end(), b.slot_mapping.begin(), b.slot_mapping.end());
  for (size_t q = 1; q < b.query_start.size(); ++q) {
    a.query_start.push_back(tokens + b.query_start[q]);
  }
  a.context_lens.insert(a.context_lens.end(), b.context_lens.begin(), b.context_lens.end());
  a.block_tables.insert(a.block_tables.end(), b.block_tables.begin(), b.block_tables.end());
  for (SampleRequest r : b.samples) {
    r.seq_index += seqs;
    a.samples.push_back(r);
  }
  return a;
}

// A mixed step: sequences [0, decode) decode one token at position o.prompt (their prompts
// prefilled once before) beside sequence `decode`'s `prompt`-token prompt, every sequence
// sampled; the step's median wall time (Execute) after one warm-up.
absl::StatusOr<double> TimeMixed(CudaBackend& backend, const ModelConfig& config,
                                 const Options& o, int32_t decode, int32_t prompt) {
  const int32_t vocab = config.vocab_size;
  Batch batch(decode + 1, MixedBlocksPerSeq(o), o.seed + 31 * decode + prompt);
  RETURN_IF_ERROR(PrefillBatch(backend, batch, decode, o.prompt, vocab, nullptr));
  std::vector<double> ms;
  for (int32_t rep = 0; rep <= o.ttft_repeats; ++rep) {
    const StepInput in = Join(batch.Step(0, decode, o.prompt, 1, vocab),
                              batch.Step(decode, 1, 0, prompt, vocab));
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

// Bytes one decode step must read: every weight (the embedding table only through the LM head
// when tied; untied, only the batch's rows are gathered, counted as none) plus the batch's KV.
struct StepBytes {
  double weights = 0.0;
  double kv_per_seq = 0.0;  // at the run's mean context
};

StepBytes FloorBytes(const CudaBackend& backend, const ModelConfig& c, const Options& o) {
  StepBytes b;
  b.weights = static_cast<double>(backend.weight_bytes());
  if (!c.tie_word_embeddings) b.weights -= 2.0 * c.vocab_size * c.hidden_size;
  const double mean_context = o.prompt + (o.steps + 1) / 2.0;  // contexts prompt+1..prompt+steps
  b.kv_per_seq = mean_context * static_cast<double>(backend.KvBytesPerBlock(1));
  return b;
}

Json ConfigJson(const ModelConfig& c) {
  return Json{{"vocab", c.vocab_size},          {"hidden", c.hidden_size},
              {"ffn", c.intermediate_size},     {"layers", c.num_layers},
              {"heads", c.num_heads},           {"kv_heads", c.num_kv_heads},
              {"head_dim", c.head_dim},         {"rope_theta", c.rope_theta},
              {"llama3_rope_scaling", c.rope_scaling.has_value()},
              {"tied", c.tie_word_embeddings}};
}

// The GPU telemetry of one run into a decode row's fields `<prefix>gpu_...`.
void AddTelemetry(const tools::TelemetrySummary& gpu, const std::string& prefix, Json& row) {
  row[prefix + "gpu_samples"] = gpu.samples;
  row[prefix + "gpu_sm_mhz_median"] = gpu.sm_mhz_median;
  row[prefix + "gpu_sm_mhz_min"] = gpu.sm_mhz_min;
  row[prefix + "gpu_sm_mhz_max"] = gpu.sm_mhz_max;
  row[prefix + "gpu_power_w_median"] = gpu.power_w_median;
  row[prefix + "gpu_power_capped_fraction"] = gpu.power_capped_fraction;
  row[prefix + "gpu_thermal_fraction"] = gpu.thermal_fraction;
}

// One model: a graph backend (decode at every batch, TTFT, start-up), then an eager one.
absl::StatusOr<Json> BenchModel(const Options& o, const std::string& name, double bandwidth,
                                tools::GpuTelemetry* telemetry) {
  ASSIGN_OR_RETURN(ModelConfig config, Shape(name));
  const int32_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int32_t bps = (o.prompt + o.steps + kBlockSize - 1) / kBlockSize;
  int32_t blocks = max_batch * bps;
  for (int32_t p : o.ttft_prompts) blocks = std::max(blocks, p / kBlockSize + 1);
  int32_t max_seqs = max_batch;
  for (const auto& [decode, prompt] : o.mixed) {
    blocks = std::max(blocks, (decode + 1) * MixedBlocksPerSeq(o));
    max_seqs = std::max(max_seqs, decode + 1);
  }
  Json m{{"config", ConfigJson(config)}};
  std::map<int32_t, DecodeResult> graph_runs;
  Json decode = Json::array();
  for (const bool graphs : {true, false}) {
    if (!graphs && !o.eager) break;
    const char* mode = graphs ? "graph" : "eager";
    CudaBackendOptions opt;
    opt.device = o.device;
    opt.max_num_tokens = kMaxNumTokens;
    opt.max_num_seqs = max_seqs;
    opt.max_model_len = o.max_model_len;
    opt.enable_cuda_graphs = graphs;
    opt.max_penalty_tokens = o.max_penalty_tokens;
    double t0 = Now();
    ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend,
                     CreateCudaBackendWithRandomWeights(config, o.seed, opt));
    const double create_s = Now() - t0;
    t0 = Now();
    RETURN_IF_ERROR(backend->AllocateKvCache({blocks, kBlockSize}));
    const double kv_s = Now() - t0;
    const StepBytes bytes = FloorBytes(*backend, config, o);
    m["weight_bytes"] = backend->weight_bytes();
    m["weight_bytes_read_per_step"] = bytes.weights;
    m["kv_bytes_per_token"] = backend->KvBytesPerBlock(1);
    m["kv_pool_bytes"] = backend->KvBytesPerBlock(kBlockSize) * blocks;
    m["startup"][mode] = Json{{"create_backend_s", create_s},
                              {"allocate_kv_and_capture_s", kv_s},
                              {"graph_capture_s", backend->graph_capture_seconds()},
                              {"graph_capture_bytes", backend->graph_capture_bytes()},
                              {"graph_buckets", backend->graph_buckets()},
                              {"graph_count", backend->graph_count()},
                              {"prefill_graph_tokens", backend->prefill_graph_tokens()},
                              {"mixed_graph_count", backend->mixed_graph_count()},
                              {"persistent_decode_batch1", backend->persistent_decode()}};
    std::printf("%s %s: backend %.2f s, kv+capture %.2f s, capture %.2f s / %.1f MiB, "
                "%zu buckets (%zu graphs), prefill graphs up to %d tokens, batch 1 %s\n",
                name.c_str(), mode, create_s, kv_s, backend->graph_capture_seconds(),
                static_cast<double>(backend->graph_capture_bytes()) / (1 << 20),
                backend->graph_buckets().size(), backend->graph_count(),
                backend->prefill_graph_tokens().empty() ? 0
                                                        : backend->prefill_graph_tokens().back(),
                backend->persistent_decode() ? "persistent kernel" : "layered kernels");
    std::fflush(stdout);
    for (size_t i = 0; i < o.batches.size(); ++i) {
      const int32_t bs = o.batches[i];
      // Inputs built in the loop: timed with graphs only (eager is for the graph speed-up).
      // Rows sampled on the host do not chain: no pipelined run then.
      const bool pipelined = graphs && !PenaltiesOnHost(o);
      if (telemetry != nullptr) telemetry->Start();
      absl::StatusOr<DecodeResult> timed =
          TimeDecode(*backend, config, o, bs, graphs ? o.built_repeats : 0, pipelined);
      const tools::TelemetrySummary gpu =
          telemetry != nullptr ? telemetry->Stop() : tools::TelemetrySummary{};
      RETURN_IF_ERROR(timed.status());
      DecodeResult& r = *timed;
      const double floor_ms = (bytes.weights + bs * bytes.kv_per_seq) / bandwidth * 1e3;
      std::printf("  %s bs %3d: tpot %.3f ms (inputs built in the loop %.3f, pipelined %.3f, "
                  "tokens equal %.3f), floor %.3f ms%s%s\n",
                  mode, bs, r.tpot_ms, r.tpot_built_ms, r.tpot_pipelined_ms,
                  r.pipelined_tokens_equal, floor_ms,
                  graphs && !r.graph_replayed ? "  [NOT all steps replayed a graph]" : "",
                  pipelined && r.pipelined_tokens_equal != 1.0 ? "  [PIPELINED TOKENS DIFFER]"
                                                                 : "");
      if (telemetry != nullptr) {
        std::printf("    gpu meanwhile: %s\n", tools::FormatTelemetry(gpu).c_str());
      }
      std::fflush(stdout);
      if (graphs) {
        decode.push_back(Json{{"batch", bs},
                              {"tpot_ms", r.tpot_ms},
                              {"tpot_inputs_built_ms", r.tpot_built_ms},
                              {"tpot_pipelined_ms", r.tpot_pipelined_ms},
                              {"pipelined_tokens_equal", r.pipelined_tokens_equal},
                              {"tok_s", bs / (r.tpot_ms * 1e-3)},
                              {"floor_ms", floor_ms},
                              {"floor_fraction", floor_ms / r.tpot_ms},
                              {"graph_replayed", r.graph_replayed}});
        AddTelemetry(gpu, "", decode.back());
        graph_runs[bs] = std::move(r);
        continue;
      }
      Json& row = decode[i];
      const DecodeResult& g = graph_runs[bs];
      size_t same = 0;
      for (size_t k = 0; k < r.tokens.size() && k < g.tokens.size(); ++k) {
        same += r.tokens[k] == g.tokens[k];
      }
      row["eager_tpot_ms"] = r.tpot_ms;
      AddTelemetry(gpu, "eager_", row);
      row["graph_speedup"] = r.tpot_ms / g.tpot_ms;  // eager time over graph time
      row["greedy_tokens_equal_eager"] =
          g.tokens.empty() ? 0.0 : static_cast<double>(same) / g.tokens.size();
    }
    // With graphs, prompts up to the largest prefill token bucket replay a prefill graph.
    for (int32_t p : o.ttft_prompts) {
      ASSIGN_OR_RETURN(double ms, TimeTtft(*backend, config, o, p));
      m[graphs ? "ttft_ms" : "ttft_eager_ms"][std::to_string(p)] = ms;
      std::printf("  %s ttft prompt %d: %.3f ms\n", mode, p, ms);
    }
    // With graphs, mixed steps up to the largest token bucket replay a multi-sequence graph.
    for (const auto& [decode, prompt] : o.mixed) {
      ASSIGN_OR_RETURN(double ms, TimeMixed(*backend, config, o, decode, prompt));
      m[graphs ? "mixed_ms" : "mixed_eager_ms"][absl::StrCat(decode, "+", prompt)] = ms;
      std::printf("  %s mixed step, %d decode rows + a %d-token prompt: %.3f ms\n", mode, decode,
                  prompt, ms);
    }
  }
  m["decode"] = std::move(decode);
  return m;
}

void PrintTable(const Json& models) {
  std::printf("\n%-14s %5s %10s %10s %8s %11s %9s %7s %10s %7s %6s\n", "model", "batch",
              "tpot_ms", "built_ms", "pipe_ms", "tok/s", "floor_ms", "floor%", "eager_ms",
              "graphx", "match");
  for (const auto& [name, m] : models.items()) {
    if (!m.contains("decode")) continue;
    for (const Json& r : m["decode"]) {
      std::printf("%-14s %5d %10.3f %10.3f %8.3f %11.1f %9.3f %6.1f%% %10.3f %7.2f %6.3f\n",
                  name.c_str(), r["batch"].get<int>(), r["tpot_ms"].get<double>(),
                  r["tpot_inputs_built_ms"].get<double>(),
                  r.value("tpot_pipelined_ms", 0.0), r["tok_s"].get<double>(),
                  r["floor_ms"].get<double>(), 100.0 * r["floor_fraction"].get<double>(),
                  r.value("eager_tpot_ms", 0.0), r.value("graph_speedup", 0.0),
                  r.value("greedy_tokens_equal_eager", 0.0));
    }
    if (m.contains("ttft_ms")) {
      std::printf("%-14s TTFT batch 1:", name.c_str());
      for (const auto& [p, ms] : m["ttft_ms"].items()) {
        std::printf("  prompt %s %.2f ms", p.c_str(), ms.get<double>());
        if (m.contains("ttft_eager_ms") && m["ttft_eager_ms"].contains(p)) {
          std::printf(" (eager %.2f)", m["ttft_eager_ms"][p].get<double>());
        }
      }
      std::printf("\n");
    }
    if (m.contains("mixed_ms")) {
      std::printf("%-14s mixed step (decode rows + prompt):", name.c_str());
      for (const auto& [shape, ms] : m["mixed_ms"].items()) {
        std::printf("  %s %.2f ms", shape.c_str(), ms.get<double>());
        if (m.contains("mixed_eager_ms") && m["mixed_eager_ms"].contains(shape)) {
          std::printf(" (eager %.2f)", m["mixed_eager_ms"][shape].get<double>());
        }
      }
      std::printf("\n");
    }
  }
}

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) return false;
    if constexpr (std::is_same_v<T, std::string>) {
      out->push_back(item);
    } else {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (*end != '\0' || v <= 0) return false;
      out->push_back(static_cast<T>(v));
    }
  }
  return !out->empty();
}

// "D:P,D:P": decode rows and prompt tokens of each mixed step.
bool ParseMixed(const std::string& text, std::vector<std::pair<int32_t, int32_t>>* out) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    std::vector<int32_t> decode, prompt;
    if (colon == std::string::npos || !ParseList(item.substr(0, colon), &decode) ||
        !ParseList(item.substr(colon + 1), &prompt) || decode.size() != 1 ||
        prompt.size() != 1) {
      return false;
    }
    out->emplace_back(decode[0], prompt[0]);
  }
  return !out->empty();
}

absl::StatusOr<Options> ParseFlags(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (a == "--no-eager") {
      o.eager = false;
      continue;
    }
    if (a == "--penalties") {
      o.penalties = true;
      continue;
    }
    if (a == "--kernel-trace") {
      if (!kernels::KernelTraceCompiledIn()) {
        return absl::FailedPreconditionError(
            "--kernel-trace: this build does not trace its kernels (configure with "
            "-DRTGEN_KERNEL_TRACE=ON)");
      }
      o.kernel_trace = true;
      continue;
    }
    // The flag is named first (an unknown one as unknown), then its value checked.
    const bool has_value = i + 1 < argc;
    const std::string v = has_value ? argv[i + 1] : "";
    char* end = nullptr;
    const long parsed = std::strtol(v.c_str(), &end, 10);
    const int32_t n = *end == '\0' && parsed >= 0 && parsed <= (1 << 30) ? parsed : -1;
    bool ok = true;
    if (a == "--models") ok = ParseList(v, &o.models);
    else if (a == "--batches") ok = ParseList(v, &o.batches);
    else if (a == "--ttft-prompts") ok = ParseList(v, &o.ttft_prompts);
    else if (a == "--mixed") ok = ParseMixed(v, &o.mixed);
    else if (a == "--prompt") ok = (o.prompt = n) > 0;
    else if (a == "--steps") ok = (o.steps = n) > 0;
    else if (a == "--repeats") ok = (o.repeats = n) > 0;
    else if (a == "--built-repeats") ok = (o.built_repeats = n) >= 0;
    else if (a == "--ttft-repeats") ok = (o.ttft_repeats = n) > 0;
    else if (a == "--max-model-len") ok = (o.max_model_len = n) > 0;
    else if (a == "--seed") ok = n >= 0, o.seed = static_cast<uint64_t>(n);
    else if (a == "--device") ok = (o.device = n) >= 0;
    else if (a == "--json") o.json_path = v;
    else if (a == "--max-penalty-tokens") ok = (o.max_penalty_tokens = n) >= 0;
    else if (a == "--logprobs") ok = (o.logprobs = n) >= 0 && n <= kernels::kMaxTopLogprobs;
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    if (!has_value) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
    ++i;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", a, ": ", v));
  }
  if (o.prompt > kMaxNumTokens || o.prompt + o.steps > o.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt must be <= ", kMaxNumTokens,
                                                   " and prompt + steps <= --max-model-len"));
  }
  for (int32_t p : o.ttft_prompts) {
    if (p > kMaxNumTokens || p >= o.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat("--ttft-prompts: ", p, " must be <= ",
                                                     kMaxNumTokens, " and < --max-model-len"));
    }
  }
  for (int32_t b : o.batches) {
    if (b > kMaxNumTokens) return absl::InvalidArgumentError("--batches: too large");
  }
  for (const auto& [decode, prompt] : o.mixed) {
    if (prompt < 2 || decode + prompt > kMaxNumTokens || prompt >= o.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mixed: ", decode, ":", prompt, " must have prompt >= 2 (one token is a decode row), ",
          "decode + prompt <= ", kMaxNumTokens, " and prompt < --max-model-len"));
    }
  }
  return o;
}

constexpr char kUsage[] =
    "usage: rtgen-engine-bench [--models smollm2-135m,llama3.2-1b,llama3-8b]\n"
    "                          [--batches 1,8,32,64,128,256] [--prompt 128] [--steps 128]\n"
    "                          [--repeats 5] [--built-repeats 3] [--ttft-repeats 5]\n"
    "                          [--ttft-prompts 128,2048] [--no-eager] [--max-model-len 4096]\n"
    "                          [--seed 1] [--device 0] [--json FILE] [--kernel-trace]\n"
    "                          [--penalties] [--max-penalty-tokens 4096] [--logprobs 0]\n"
    "                          [--mixed DECODE:PROMPT,...]\n"
    "Decode TPOT of the CUDA backend at real model shapes (random bf16 weights) against the\n"
    "memory-bandwidth floor, graphs vs eager, TTFT and start-up. Switches read from the\n"
    "environment include RTGEN_MATMUL_TUNE (0 / wide), RTGEN_MATMUL_TUNE_CACHE=FILE and\n"
    "RTGEN_NORM_FOLD=0 (kernels/env_switch.h lists them all).\n";

std::string SamplingLabel(const Options& o) {
  const std::string top =
      o.logprobs > 0 ? absl::StrCat(", top ", o.logprobs, " logprobs per row") : "";
  if (!o.penalties) return absl::StrCat("greedy", top);
  return absl::StrCat("greedy after penalties (repetition 1.1, presence 0.3, frequency 0.2) ",
                      PenaltiesOnHost(o) ? "on the host" : "on the device", top);
}

int Main(int argc, char** argv) {
  absl::StatusOr<Options> o = ParseFlags(argc, argv);
  if (!o.ok()) {
    std::fprintf(stderr, "rtgen-engine-bench: %s\n%s", std::string(o.status().message()).c_str(),
                 kUsage);
    return 2;
  }
  if (o->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!CudaDeviceAvailable()) {
    std::fprintf(stderr, "rtgen-engine-bench: no CUDA device\n");
    return 77;
  }
  if (cudaSetDevice(o->device) != cudaSuccess) {
    std::fprintf(stderr, "rtgen-engine-bench: cannot use device %d\n", o->device);
    return 2;
  }
  absl::StatusOr<Json> device = DeviceInfo(o->device);
  absl::StatusOr<double> bandwidth = device.ok() ? MeasureCopyBandwidth() : device.status();
  if (!bandwidth.ok()) {
    std::fprintf(stderr, "rtgen-engine-bench: %s\n",
                 std::string(bandwidth.status().message()).c_str());
    return 1;
  }
  std::printf("device: %s\ncopy bandwidth (read+write): %.1f GB/s\nsampling: %s\n",
              device->dump().c_str(), *bandwidth / 1e9, SamplingLabel(*o).c_str());
  char bus_id[32] = {};
  absl::StatusOr<std::unique_ptr<tools::GpuTelemetry>> telemetry =
      cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), o->device) == cudaSuccess
          ? tools::GpuTelemetry::Open(bus_id, std::chrono::milliseconds(20))
          : absl::UnavailableError("no PCI bus id for the device");
  const std::string telemetry_label =
      telemetry.ok() ? absl::StrCat("NVML every 20 ms, device ", bus_id)
                     : absl::StrCat("unavailable: ", telemetry.status().message());
  std::printf("gpu telemetry: %s\n", telemetry_label.c_str());
  Json out{{"device", *device},
           {"gpu_telemetry", telemetry_label},
           {"copy_bandwidth_gbs", *bandwidth / 1e9},
           {"settings", Json{{"prompt", o->prompt}, {"steps", o->steps},
                             {"repeats", o->repeats}, {"built_repeats", o->built_repeats},
                             {"ttft_repeats", o->ttft_repeats},
                             {"max_model_len", o->max_model_len}, {"block_size", kBlockSize},
                             {"max_num_tokens", kMaxNumTokens}, {"seed", o->seed},
                             {"weights", "random bf16 on device, normal(0, 0.02)"},
                             {"sampling", SamplingLabel(*o)}}},
           {"models", Json::object()}};
  int rc = 0;
  for (const std::string& name : o->models) {
    absl::StatusOr<Json> m =
        BenchModel(*o, name, *bandwidth, telemetry.ok() ? telemetry->get() : nullptr);
    if (!m.ok()) {
      std::fprintf(stderr, "rtgen-engine-bench: %s: %s\n", name.c_str(),
                   std::string(m.status().message()).c_str());
      out["models"][name] = Json{{"error", std::string(m.status().message())}};
      rc = 1;
    } else {
      out["models"][name] = std::move(*m);
    }
    if (!o->json_path.empty()) std::ofstream(o->json_path) << out.dump(1) << "\n";
  }
  PrintTable(out["models"]);
  return rc;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
