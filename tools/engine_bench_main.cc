// rtgen-engine-bench: decode speed of the CUDA backend at real model shapes (random bf16 weights
// drawn on the device), next to the memory-bandwidth floor, graphs vs eager, TTFT and start-up.
//
//   rtgen-engine-bench [--models smollm2-135m,llama3.2-1b,llama3-8b] [--batches 1,8,32,64,128,256]
//                      [--prompt 128] [--steps 128] [--repeats 5] [--built-repeats 3]
//                      [--ttft-repeats 5]
//                      [--ttft-prompts 128,2048] [--no-eager] [--max-model-len 4096]
//                      [--seed 1] [--device 0] [--json FILE] [--kernel-trace]
//                      [--penalties] [--max-penalty-tokens N] [--logprobs N]
//                      [--profile-step] [--model-rounds N] [--spacer-mib N]
//                      [--kv-spacer-mib N]
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
// --profile-step runs one more decode step after each graph timing between cudaProfilerStart and
// cudaProfilerStop, for `ncu --profile-from-start off`. --model-rounds N times each model N times
// in turn, each round on a backend built anew (JSON keys "NAME#2" on). --spacer-mib and
// --kv-spacer-mib hold device memory before each backend, or between its creation and its KV
// pool and graph capture, so that what it allocates after lands elsewhere (the draw's diagnostic,
// docs/perf/gpu_notes.md session 77; RTGEN_DIAG_ALLOC_LOG=1 prints every allocation).

#include <cublasLt.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/kernel_trace.h"
#include "kernels/random_weights.h"
#include "tools/copy_bandwidth.h"
#include "tools/engine_bench_options.h"
#include "tools/engine_bench_report.h"
#include "tools/engine_bench_steps.h"
#include "tools/engine_bench_timing.h"
#include "tools/gpu_telemetry.h"
#include "tools/host_clock.h"

namespace rtgen::tools {
namespace {

using Options = EngineBenchOptions;

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

// With graphs (--kernel-trace): prints the timeline of one more decode step's kernels.
DecodeStepTrace KernelTimeline(const std::string& model, int32_t batch) {
  return [model, batch](const std::function<absl::Status()>& one_step) -> absl::Status {
    RETURN_IF_ERROR(kernels::KernelTraceBegin());
    RETURN_IF_ERROR(one_step());
    ASSIGN_OR_RETURN(std::vector<kernels::KernelSpan> spans, kernels::KernelTraceEnd());
    std::printf("kernel timeline of one decode step, %s batch %d (us):\n%s", model.c_str(),
                batch, kernels::FormatKernelTimeline(spans).c_str());
    return absl::OkStatus();
  };
}

// With graphs (--profile-step): one more decode step inside the profiler's range, and only it.
absl::Status ProfiledStep(const std::function<absl::Status()>& one_step) {
  RTGEN_CUDA_RETURN_IF_ERROR(cudaProfilerStart());
  const absl::Status ran = one_step();
  const cudaError_t synced = cudaDeviceSynchronize();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaProfilerStop());
  RETURN_IF_ERROR(ran);
  RTGEN_CUDA_RETURN_IF_ERROR(synced);
  return absl::OkStatus();
}

// The step trace a graph timing at `batch` runs, if any.
DecodeStepTrace StepTrace(const Options& o, const std::string& model, int32_t batch) {
  if (o.kernel_trace) return KernelTimeline(model, batch);
  if (o.profile_step) return ProfiledStep;
  return DecodeStepTrace();
}

// A figure with three decimals, or "-" for a run not made.
std::string Figure(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.3f", *v) : "-";
}

// --spacer-mib / --kv-spacer-mib: `mib` MiB of device memory, held by the caller through the
// backend's round (none for 0), its address printed.
absl::StatusOr<DeviceBuffer> Spacer(const char* what, int32_t mib) {
  if (mib == 0) return DeviceBuffer();
  const size_t bytes = size_t{static_cast<uint32_t>(mib)} << 20;
  ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(bytes));
  std::printf("%s: %d MiB at %p\n", what, mib, b.get());
  return b;
}

// One model: a graph backend (decode at every batch, TTFT, start-up), then an eager one.
absl::StatusOr<Json> BenchModel(const Options& o, const std::string& name, double bandwidth,
                                GpuTelemetry* telemetry) {
  ASSIGN_OR_RETURN(ModelConfig config, BenchShape(name));
  const BenchKvNeeds kv = BenchKv(o);
  Json m{{"config", ConfigJson(config)}};
  std::map<int32_t, DecodeResult> graph_runs;
  Json decode = Json::array();
  for (const bool graphs : {true, false}) {
    if (!graphs && !o.eager) break;
    const char* mode = graphs ? "graph" : "eager";
    CudaBackendOptions opt;
    opt.device = o.device;
    opt.max_num_tokens = kBenchMaxNumTokens;
    opt.max_num_seqs = kv.max_seqs;
    opt.max_model_len = o.max_model_len;
    opt.enable_cuda_graphs = graphs;
    opt.max_penalty_tokens = o.max_penalty_tokens;
    ASSIGN_OR_RETURN(const DeviceBuffer spacer, Spacer("spacer", o.spacer_mib));
    double t0 = Now();
    ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend,
                     CreateCudaBackendWithRandomWeights(config, o.seed, opt));
    const double create_s = Now() - t0;
    ASSIGN_OR_RETURN(const DeviceBuffer kv_spacer, Spacer("kv spacer", o.kv_spacer_mib));
    t0 = Now();
    RETURN_IF_ERROR(backend->AllocateKvCache({kv.blocks, kBenchBlockSize}));
    const double kv_s = Now() - t0;
    const StepBytes bytes = FloorBytes(config, backend->weight_bytes(),
                                       backend->KvBytesPerBlock(1), o.prompt, o.steps);
    m["weight_bytes"] = backend->weight_bytes();
    m["weight_bytes_read_per_step"] = bytes.weights;
    m["kv_bytes_per_token"] = backend->KvBytesPerBlock(1);
    m["kv_pool_bytes"] = backend->KvBytesPerBlock(kBenchBlockSize) * kv.blocks;
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
      // The GPU's clocks over the timed runs only (not the batch's prefill or the warm-ups).
      TelemetrySummary gpu;
      bool sampling = false;
      TimedWindow window;
      if (telemetry != nullptr) {
        window.start = [&] {
          telemetry->Start();
          sampling = true;
        };
        window.stop = [&] {
          gpu = telemetry->Stop();
          sampling = false;
        };
      }
      absl::StatusOr<DecodeResult> timed =
          TimeDecode(*backend, config, o, bs, graphs ? o.built_repeats : 0, pipelined,
                     pipelined ? StepTrace(o, config.name, bs) : DecodeStepTrace(), window);
      if (sampling) gpu = telemetry->Stop();  // a run failed inside the window
      RETURN_IF_ERROR(timed.status());
      DecodeResult& r = *timed;
      const double floor_ms = FloorMs(bytes, bs, bandwidth);
      std::printf("  %s bs %3d: tpot %.3f ms (inputs built in the loop %s, pipelined %s, "
                  "tokens equal %s), floor %.3f ms%s%s\n",
                  mode, bs, r.tpot_ms, Figure(r.tpot_built_ms).c_str(),
                  Figure(r.tpot_pipelined_ms).c_str(), Figure(r.pipelined_tokens_equal).c_str(),
                  floor_ms, graphs && !r.graph_replayed ? "  [NOT all steps replayed a graph]" : "",
                  r.pipelined_tokens_equal.value_or(1.0) != 1.0 ? "  [PIPELINED TOKENS DIFFER]"
                                                                 : "");
      if (telemetry != nullptr) {
        std::printf("    gpu meanwhile: %s\n", FormatTelemetry(gpu).c_str());
      }
      std::fflush(stdout);
      if (graphs) {
        decode.push_back(GraphDecodeRow(bs, r, bytes, bandwidth));
        AddTelemetry(gpu, "", decode.back());
        graph_runs[bs] = std::move(r);
        continue;
      }
      Json& row = decode[i];
      AddEagerFigures(r, graph_runs[bs], row);
      AddTelemetry(gpu, "eager_", row);
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

// The JSON file, whole; false where it could not be written.
bool WriteJson(const std::string& path, const Json& json) {
  std::ofstream f(path);
  f << json.dump(1) << "\n";
  f.close();
  return !f.fail();
}

int Main(int argc, char** argv) {
  absl::StatusOr<Options> o = ParseEngineBenchFlags(argc, argv);
  if (!o.ok()) {
    std::fprintf(stderr, "rtgen-engine-bench: %s\n%s", std::string(o.status().message()).c_str(),
                 kEngineBenchUsage);
    return 2;
  }
  if (o->help) {
    std::fputs(kEngineBenchUsage, stdout);
    return 0;
  }
  if (o->kernel_trace && !kernels::KernelTraceCompiledIn()) {
    std::fprintf(stderr, "rtgen-engine-bench: --kernel-trace: this build does not trace its "
                 "kernels (configure with -DRTGEN_KERNEL_TRACE=ON)\n");
    return 2;
  }
  if (!CudaDeviceAvailable()) {
    std::fprintf(stderr,
                 "rtgen-engine-bench: no CUDA device, or none this build has device code for\n");
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
  absl::StatusOr<std::unique_ptr<GpuTelemetry>> telemetry =
      cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), o->device) == cudaSuccess
          ? GpuTelemetry::Open(bus_id, std::chrono::milliseconds(20))
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
                             {"max_model_len", o->max_model_len}, {"block_size", kBenchBlockSize},
                             {"max_num_tokens", kBenchMaxNumTokens}, {"seed", o->seed},
                             {"weights", "random bf16 on device, normal(0, 0.02)"},
                             {"sampling", SamplingLabel(*o)},
                             {"prompts", "seeded ids: splitmix64 of (seed, sequence, position)"}}},
           {"models", Json::object()}};
  int rc = 0;
  const int64_t runs = static_cast<int64_t>(o->models.size()) * o->model_rounds;
  for (int64_t i = 0; i < runs; ++i) {
    const std::string& name = o->models[i / o->model_rounds];
    const int32_t round = static_cast<int32_t>(i % o->model_rounds) + 1;
    const std::string key = round == 1 ? name : absl::StrCat(name, "#", round);
    if (o->model_rounds > 1) {
      std::printf("%s: round %d of %d, a backend built anew\n", name.c_str(), round,
                  o->model_rounds);
    }
    absl::StatusOr<Json> m =
        BenchModel(*o, name, *bandwidth, telemetry.ok() ? telemetry->get() : nullptr);
    if (!m.ok()) {
      std::fprintf(stderr, "rtgen-engine-bench: %s: %s\n", key.c_str(),
                   std::string(m.status().message()).c_str());
      out["models"][key] = Json{{"error", std::string(m.status().message())}};
      rc = 1;
    } else {
      out["models"][key] = std::move(*m);
    }
    // Written after every model, so a later failure keeps the earlier figures.
    if (!o->json_path.empty() && !WriteJson(o->json_path, out)) {
      std::fprintf(stderr, "rtgen-engine-bench: cannot write --json %s\n", o->json_path.c_str());
      rc = 1;
    }
  }
  PrintTable(out["models"]);
  return rc;
}

}  // namespace
}  // namespace rtgen::tools

int main(int argc, char** argv) { return rtgen::tools::Main(argc, argv); }
