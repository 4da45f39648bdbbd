// rtgen-cpu-bench: prompt-processing and single-stream decode throughput of the CPU backend on a
// GGUF model, next to the memory-bandwidth floor (weight bytes per token / measured bandwidth).
//
//   rtgen-cpu-bench [--model PATH] [--threads N] [--dtype native|bf16|f32] [--prompt-tokens N]
//                   [--decode-tokens N] [--runs N] [--json]

#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/huge_page_allocator.h"
#include "engine/cpu/thread_pool.h"
#include "engine/loader/model_loader.h"
#include "tools/host_clock.h"
#include "tools/int_flag.h"
#include "tools/median.h"

namespace rtgen {
namespace {

using tools::Median;
using tools::Now;

constexpr double kTargetDecodeTokensPerSecond = 40.0;

struct Options {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 0;
  WeightDtype dtype = WeightDtype::kNative;
  int prompt_tokens = 128;
  int decode_tokens = 128;
  int runs = 3;
  bool json = false;
};

// CPU seconds this process has used (all threads).
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

// Streaming read bandwidth (bytes/s) over a 512 MiB buffer split across the pool (allocated like
// the weights, on huge pages where the kernel allows): the median of 5 passes after one warm-up
// pass.
double MeasureBandwidth(ThreadPool& pool) {
  const int64_t n = (int64_t{512} << 20) / sizeof(float);
  std::vector<float, HugePageAllocator<float>> buf(n, 1.0f);
  std::vector<float> sums(pool.num_threads(), 0.0f);
  std::vector<double> seconds;
  for (int rep = 0; rep < 6; ++rep) {
    const double t0 = Now();
    pool.ParallelFor(n, 4096, [&](int64_t b, int64_t e, int thread) {
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (int64_t i = b; i + 32 <= e; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(&buf[i]));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(&buf[i + 8]));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(&buf[i + 16]));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(&buf[i + 24]));
      }
      float out[8];
      _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
      sums[thread] += out[0];
    });
    if (rep > 0) seconds.push_back(Now() - t0);  // pass 0 warms the pool and the TLB
  }
  if (sums[0] < 0) std::printf(" ");  // keeps the reads observable
  return static_cast<double>(n) * sizeof(float) / Median(seconds);
}

struct RunTimes {
  double prefill_s = 0;
  double decode_s = 0;
  double decode_cpu_s = 0;  // process CPU time during decode; << threads * decode_s when shared
};

// One request: a prompt_tokens prefill step, then decode_tokens greedy single-token steps.
absl::StatusOr<RunTimes> RunOnce(CpuBackend& backend, const Options& o, int32_t block_size) {
  const int32_t vocab = backend.config().vocab_size;
  const int32_t total = o.prompt_tokens + o.decode_tokens;
  const int32_t blocks = (total + block_size - 1) / block_size;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  StepInput in;
  in.max_blocks_per_seq = blocks;
  for (int32_t b = 0; b < blocks; ++b) in.block_tables.push_back(b);
  in.query_start = {0, o.prompt_tokens};
  in.context_lens = {o.prompt_tokens};
  for (int32_t p = 0; p < o.prompt_tokens; ++p) {
    in.token_ids.push_back(static_cast<int32_t>((p * 7919 + 13) % vocab));
    in.positions.push_back(p);
    in.slot_mapping.push_back(p);  // blocks are 0..n-1, so slot == position
  }
  in.samples.push_back({0, &greedy, {}, {}, 0});
  RunTimes times;
  double t0 = Now();
  absl::StatusOr<StepOutput> out = backend.Execute(in);
  if (!out.ok()) return out.status();
  times.prefill_s = Now() - t0;

  in.is_decode_only = true;
  const double cpu0 = ProcessCpuSeconds();
  t0 = Now();
  for (int32_t i = 0; i < o.decode_tokens; ++i) {
    const int32_t pos = o.prompt_tokens + i;
    in.token_ids = {out->sampled[0].token_id};
    in.positions = {pos};
    in.slot_mapping = {pos};
    in.query_start = {0, 1};
    in.context_lens = {pos + 1};
    out = backend.Execute(in);
    if (!out.ok()) return out.status();
  }
  times.decode_s = Now() - t0;
  times.decode_cpu_s = ProcessCpuSeconds() - cpu0;
  return times;
}

// Largest --prompt-tokens / --decode-tokens: their sum and its KV block count stay in int32_t.
constexpr int kMaxTokensFlag = 1 << 20;

constexpr char kUsage[] =
    "usage: rtgen-cpu-bench [--model PATH] [--threads N] [--dtype native|bf16|f32] "
    "[--prompt-tokens N] [--decode-tokens N] [--runs N] [--json]\n";

// An error naming the flag (and the value, where one was given), then the usage line.
bool Refuse(const std::string& what) {
  std::fprintf(stderr, "rtgen-cpu-bench: %s\n%s", what.c_str(), kUsage);
  return false;
}

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a != "--model" && a != "--threads" && a != "--dtype" && a != "--prompt-tokens" &&
        a != "--decode-tokens" && a != "--runs") {
      return Refuse("unknown flag '" + a + "'");
    }
    if (i + 1 >= argc) return Refuse(a + " needs a value");
    const char* v = argv[++i];
    if (a == "--model") {
      o.model = v;
    } else if (a == "--threads") {
      // 0: every hardware thread
      if (!tools::ParseIntFlag(a.c_str(), v, 0, 4096, &o.threads)) return false;
    } else if (a == "--dtype") {
      if (!std::strcmp(v, "f32")) {
        o.dtype = WeightDtype::kF32;
      } else if (!std::strcmp(v, "bf16")) {
        o.dtype = WeightDtype::kBf16;
      } else if (!std::strcmp(v, "native")) {
        o.dtype = WeightDtype::kNative;
      } else {
        return Refuse(std::string("--dtype must be native, bf16 or f32 (got '") + v + "')");
      }
    } else if (a == "--prompt-tokens") {
      if (!tools::ParseIntFlag(a.c_str(), v, 1, kMaxTokensFlag, &o.prompt_tokens)) return false;
    } else if (a == "--decode-tokens") {
      if (!tools::ParseIntFlag(a.c_str(), v, 1, kMaxTokensFlag, &o.decode_tokens)) return false;
    } else {
      if (!tools::ParseIntFlag(a.c_str(), v, 1, 1000, &o.runs)) return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) return 2;
  absl::StatusOr<LoadedModel> model = LoadModel(o.model);
  if (!model.ok()) {
    std::fprintf(stderr, "rtgen-cpu-bench: loading %s: %s\n", o.model.c_str(),
                 model.status().ToString().c_str());
    return 1;
  }
  const int context = model->config.max_position_embeddings;
  if (context > 0 && o.prompt_tokens + o.decode_tokens > context) {
    std::fprintf(stderr,
                 "rtgen-cpu-bench: --prompt-tokens + --decode-tokens (%d) exceeds the model's "
                 "context length %d\n",
                 o.prompt_tokens + o.decode_tokens, context);
    return 2;
  }
  const std::string model_name = model->config.name;
  absl::StatusOr<std::unique_ptr<CpuBackend>> backend =
      CpuBackend::Create(model->config, std::move(model->weights), {o.threads, o.dtype});
  if (!backend.ok()) {
    std::fprintf(stderr, "rtgen-cpu-bench: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  constexpr int32_t kBlockSize = 16;
  const int32_t blocks = (o.prompt_tokens + o.decode_tokens + kBlockSize - 1) / kBlockSize;
  if (absl::Status s = (*backend)->AllocateKvCache({blocks, kBlockSize}); !s.ok()) {
    std::fprintf(stderr, "rtgen-cpu-bench: %s\n", s.ToString().c_str());
    return 1;
  }

  ThreadPool pool((*backend)->num_threads());
  const double bandwidth = MeasureBandwidth(pool);
  // A decode token reads every weight once and the KV of its context: the mean context over the
  // decode run is prompt + (decode + 1) / 2 tokens.
  const int64_t weight_bytes = (*backend)->WeightBytesPerToken();
  const int64_t kv_bytes = (*backend)->KvBytesPerBlock(1) *
                           (int64_t{o.prompt_tokens} + (int64_t{o.decode_tokens} + 1) / 2);
  const int64_t bytes_per_token = weight_bytes + kv_bytes;
  const double floor_s = bytes_per_token / bandwidth;

  // One untimed request first: the first touches of the KV cache, the scratch buffers and the
  // pool's threads are not part of any timed run.
  if (absl::StatusOr<RunTimes> warm = RunOnce(**backend, o, kBlockSize); !warm.ok()) {
    std::fprintf(stderr, "rtgen-cpu-bench: %s\n", warm.status().ToString().c_str());
    return 1;
  }
  std::vector<double> pp, tg, share;
  for (int r = 0; r < o.runs; ++r) {
    absl::StatusOr<RunTimes> t = RunOnce(**backend, o, kBlockSize);
    if (!t.ok()) {
      std::fprintf(stderr, "rtgen-cpu-bench: %s\n", t.status().ToString().c_str());
      return 1;
    }
    pp.push_back(o.prompt_tokens / t->prefill_s);
    tg.push_back(o.decode_tokens / t->decode_s);
    share.push_back(t->decode_cpu_s / (t->decode_s * (*backend)->num_threads()));
  }
  const double pp_tps = Median(pp), tg_tps = Median(tg), cpu_share = Median(share);
  const std::string cpu = CpuModel();
  const char* dtype = WeightDtypeName(o.dtype);
  const bool meets = tg_tps >= kTargetDecodeTokensPerSecond;
  if (o.json) {  // built, not printed: the CPU name and the model path may hold quotes
    const nlohmann::json j = {
        {"cpu", cpu},
        {"threads", (*backend)->num_threads()},
        {"model", o.model},
        {"weight_dtype", dtype},
        {"runs", o.runs},
        {"prompt_tokens", o.prompt_tokens},
        {"decode_tokens", o.decode_tokens},
        {"prompt_tokens_per_s", pp_tps},
        {"decode_tokens_per_s", tg_tps},
        {"weight_bytes_per_token", weight_bytes},
        {"kv_bytes_per_token", kv_bytes},
        {"memory_bandwidth_gb_s", bandwidth / 1e9},
        {"floor_ms_per_token", floor_s * 1e3},
        {"floor_tokens_per_s", 1.0 / floor_s},
        {"decode_cpu_share", cpu_share},
        {"decode_target_tokens_per_s", kTargetDecodeTokensPerSecond},
        {"meets_target", meets}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("machine:        %s, %d threads\n", cpu.c_str(), (*backend)->num_threads());
  std::printf("model:          %s (%s)\n", o.model.c_str(), model_name.c_str());
  std::printf("weight dtype:   %s (%.1f MB of weights + %.1f MB of KV read per decode token)\n",
              dtype, weight_bytes / 1e6, kv_bytes / 1e6);
  std::printf("prompt:         %8.1f tokens/s  (%d-token prompt, median of %d)\n", pp_tps,
              o.prompt_tokens, o.runs);
  std::printf("decode:         %8.1f tokens/s  (%d tokens, single stream, median of %d)\n",
              tg_tps, o.decode_tokens, o.runs);
  std::printf("cpu share:      %8.0f%% of %d threads x wall time during decode%s\n",
              100.0 * cpu_share, (*backend)->num_threads(),
              cpu_share < 0.8 ? " (machine is shared: figures understate)" : "");
  std::printf("memory:         %8.1f GB/s streaming read (median of 5)\n", bandwidth / 1e9);
  std::printf("floor:          %8.2f ms/token = %.1f tokens/s at best ((weights + KV) / "
              "bandwidth)\n", floor_s * 1e3, 1.0 / floor_s);
  std::printf("target:         %8.1f tokens/s decode: %s (%.0f%% of target, %.0f%% of floor)\n",
              kTargetDecodeTokensPerSecond, meets ? "MET" : "NOT MET",
              100.0 * tg_tps / kTargetDecodeTokensPerSecond, 100.0 * tg_tps * floor_s);
  return 0;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
