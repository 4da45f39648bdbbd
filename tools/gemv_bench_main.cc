// rtgen-gemv-bench: the decode GEMV (kernels/gemv.h) at the real decode shapes of SmolLM2-135M
// and Llama-3-8B (by default; Llama-3.2-1B by --models), against the memory-bandwidth floor and
// cuBLASLt.
//
//   rtgen-gemv-bench [--m 1,2,4,8,16,32,64] [--models smollm2-135m,llama3-8b]
//                    [--repeats 9]
//                    [--sweep] [--no-legacy] [--device 0]
//
// Per shape (n x k, the [n, k] weight of one linear layer) and batch m: random non-zero bf16
// weights and inputs drawn on the device; the weights are replicated until the copies exceed
// 256 MiB (several times the L2) and successive launches rotate through them, so every launch
// reads its weights from device memory as a decode step does. Each variant is captured into a
// CUDA graph of L launches (L so that a replay takes ~2 ms, at least 8), replayed twice to warm
// up, then `repeats` times between CUDA events; the figure is the median replay time over L,
// i.e. the time per launch inside a graph, launch gaps included. Bytes are the weights + inputs
// read and outputs written once; GB/s over the device-to-device copy bandwidth (bytes read +
// written, median of 10 copies of 1 GiB) is the % of floor.
//
// Variants: `legacy` (the kernel before the tensor-core rewrite, m in {1,2,4,8}), `gemv` (the
// default tuning), with --sweep every tuning (warps x unroll), `hopper128` and `hopper256`
// (kernels/hopper_gemm.h with either tile width, m <= 64, where the device runs it) and
// `hopper_tiled128` / `hopper_tiled256` (the same from weights laid out by HopperTileWeights;
// all four printed under the row), `rows` and `slab` (at m = 1, both one-row kernels of large
// weights, kernels/gemv_rows.h and gemv_slab.h, whatever the default picks; printed under the
// row too), `cublaslt` (MatmulContext with
// the GEMV off and its algorithm tuned per shape, as the engine runs it; the chosen algorithm is
// printed under the row) and `heur0` (the same with tuning off: the heuristic's first algorithm).
// Every variant's output on the first weight copy is compared with cuBLASLt's (relative L2); a
// value over 1e-2 (bf16 output) or 1e-3 (fp32) fails the run.

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/env_switch.h"
#include "kernels/gemv.h"
#include "kernels/gemv_rows.h"
#include "kernels/gemv_slab.h"
#include "kernels/hopper_gemm.h"
#include "kernels/matmul.h"
#include "kernels/random_fill.h"
#include "tools/copy_bandwidth.h"
#include "tools/engine_bench_options.h"
#include "tools/gemv_bench_legacy.h"
#include "tools/int_flag.h"
#include "tools/graph_replay_timer.h"
#include "tools/median.h"

namespace rtgen {
namespace {

using tools::Median;
using tools::TimeGraphReplays;
using tools::MeasureCopyBandwidth;

struct Options {
  std::vector<int> ms = {1, 2, 4, 8, 16, 32, 64};
  std::vector<std::string> models = {"smollm2-135m", "llama3-8b"};
  int repeats = 9;
  bool sweep = false;
  bool legacy = true;
  int device = 0;
};

struct Shape {
  std::string model, name;
  int n, k;
  bool y_f32;
};

// The linear layers of each model's decode step, from its synthetic shape (engine/model/
// synthetic_model.h), as kernels/model_forward.cc runs them: fused qkv, fused gate+up, and the LM
// head with fp32 logits. A name BenchShape refuses (unknown, or the test shape) is an error
// naming --models (it measured nothing and exited 0).
absl::StatusOr<std::vector<Shape>> Shapes(const std::vector<std::string>& models) {
  std::vector<Shape> out;
  for (const std::string& m : models) {
    ASSIGN_OR_RETURN(const ModelConfig c, tools::BenchShape(m));
    const int q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
    out.push_back({m, "qkv", q_dim + 2 * kv_dim, c.hidden_size, false});
    out.push_back({m, "o", c.hidden_size, q_dim, false});
    out.push_back({m, "gate_up", 2 * c.intermediate_size, c.hidden_size, false});
    out.push_back({m, "down", c.hidden_size, c.intermediate_size, false});
    out.push_back({m, "lm_head", c.vocab_size, c.hidden_size, true});
  }
  return out;
}

// One launch of a variant: weights `w`, output `y`.
using LaunchFn = std::function<absl::Status(const __nv_bfloat16* w, void* y, cudaStream_t)>;

// Median time per launch (seconds) of `launches` launches rotating over `copies` weight copies,
// captured into one graph.
absl::StatusOr<double> TimeGraph(const LaunchFn& fn, const __nv_bfloat16* w0, size_t w_elems,
                                 int copies, int launches, void* y, int repeats,
                                 cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  absl::Status st;
  for (int i = 0; i < launches && st.ok(); ++i) st = fn(w0 + (i % copies) * w_elems, y, stream);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  RETURN_IF_ERROR(st);
  RTGEN_CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> replay_ms;
  const cudaError_t timed = TimeGraphReplays(exec, stream, 2, repeats, &replay_ms);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  RTGEN_CUDA_RETURN_IF_ERROR(timed);
  return Median(replay_ms) * 1e-3 / launches;  // ms per replay -> seconds per launch
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

absl::StatusOr<std::vector<double>> ReadOutput(const void* y, size_t count, bool f32) {
  std::vector<double> out(count);
  if (f32) {
    std::vector<float> h(count);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(h.data(), y, count * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = h[i];
  } else {
    std::vector<uint16_t> h(count);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(h.data(), y, count * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = Bf16ToFloat(h[i]);
  }
  return out;
}

double RelL2(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Variant {
  std::string name;
  LaunchFn fn;
};

absl::Status Run(const Options& o) {
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, o.device));
  ASSIGN_OR_RETURN(const double bw, MeasureCopyBandwidth());
  std::printf("device: %s, %d SMs, L2 %.0f MiB, cuBLASLt %zu\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
              static_cast<size_t>(cublasLtGetVersion()));
  std::printf("floor: device-to-device copy bandwidth %.0f GB/s (read + written, median of 10)\n",
              bw / 1e9);
  std::printf("GEMV launched as a programmatic dependent: %s (RTGEN_GEMV_PDL)\n",
              kernels::EnvOnUnlessZero("RTGEN_GEMV_PDL") ? "on" : "off");
  std::printf("time per launch inside a CUDA graph, median of %d replays; %% = achieved GB/s over "
              "the copy bandwidth\n\n",
              o.repeats);
  ASSIGN_OR_RETURN(auto gemv_ctx, kernels::MatmulContext::Create(true));
  ASSIGN_OR_RETURN(auto blas_ctx, kernels::MatmulContext::Create(false, true));
  ASSIGN_OR_RETURN(auto heur_ctx, kernels::MatmulContext::Create(false, false));
  blas_ctx->AllowTuning(true);  // every shape here is tuned, as the engine tunes its buckets
  cudaStream_t stream;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // HopperGemm's workspace, as MatmulContext allocates it.
  const bool hopper = kernels::HopperGemmAvailable(o.device);
  const size_t partial_bytes = kernels::HopperGemmPartialBytes(prop.multiProcessorCount);
  ASSIGN_OR_RETURN(DeviceBuffer hopper_partials, DeviceBuffer::Allocate(partial_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer hopper_counters,
                   DeviceBuffer::Allocate(kernels::kHopperGemmMaxTiles * sizeof(uint32_t)));
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemset(hopper_counters.get(), 0, kernels::kHopperGemmMaxTiles * sizeof(uint32_t)));
  const kernels::HopperGemmWorkspace hopper_ws{hopper_partials.as<float>(),
                                               hopper_counters.as<uint32_t>(),
                                               prop.multiProcessorCount};
  std::printf("HopperGemm (TMA + wgmma): %s\n", hopper ? "available" : "not on this device/build");

  std::printf(
      "%-13s %-8s %6s %5s %2s %8s | %9s %9s %6s %6s | %9s %6s | %18s | %9s %6s | %9s %6s | %8s\n",
      "model", "layer", "n", "k", "m", "MB", "legacy_us", "gemv_us", "GB/s", "%bw", "best_us",
      "%bw", "best(warps,unroll)", "cublas_us", "%bw", "heur0_us", "%bw", "max_err");
  absl::Status failure;
  ASSIGN_OR_RETURN(const std::vector<Shape> shapes, Shapes(o.models));
  for (const Shape& s : shapes) {
    const size_t w_elems = static_cast<size_t>(s.n) * s.k;
    const size_t w_bytes = w_elems * 2;
    const int copies =
        static_cast<int>(std::min<size_t>(512, (size_t{256} << 20) / w_bytes + 1));
    ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::Allocate(w_bytes * copies));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RandomFillBf16(w.as<__nv_bfloat16>(), w_elems * copies,
                                                       {11, 1, 0.0f, 0.05f}, stream));
    const int max_m = *std::max_element(o.ms.begin(), o.ms.end());
    ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(static_cast<size_t>(max_m) * s.k * 2));
    RTGEN_CUDA_RETURN_IF_ERROR(kernels::RandomFillBf16(
        x.as<__nv_bfloat16>(), static_cast<size_t>(max_m) * s.k, {11, 2, 0.0f, 1.0f}, stream));
    const size_t y_elem = s.y_f32 ? 4 : 2;
    ASSIGN_OR_RETURN(DeviceBuffer y, DeviceBuffer::Allocate(static_cast<size_t>(max_m) * s.n * y_elem));
    ASSIGN_OR_RETURN(DeviceBuffer y_ref,
                     DeviceBuffer::Allocate(static_cast<size_t>(max_m) * s.n * y_elem));

    // Every copy of w laid out for HopperGemm's bulk copies, per tile width — only where a
    // HopperGemm variant runs (the device runs it and some m is within its rows).
    const bool tile_w = hopper && *std::min_element(o.ms.begin(), o.ms.end()) <=
                                      kernels::kHopperGemmMaxRows;
    std::vector<DeviceBuffer> tiled_w;
    std::vector<size_t> tiled_elems;
    for (const int tile : {128, 256}) {
      const size_t elems = kernels::HopperTiledWeightElems(s.n, s.k, tile, false);
      tiled_elems.push_back(elems);
      ASSIGN_OR_RETURN(DeviceBuffer t, DeviceBuffer::Allocate(tile_w ? elems * 2 * copies : 16));
      for (int c = 0; tile_w && c < copies; ++c) {
        RTGEN_CUDA_RETURN_IF_ERROR(kernels::HopperTileWeights(
            w.as<__nv_bfloat16>() + c * w_elems, s.n, s.k, tile, false,
            t.as<__nv_bfloat16>() + c * elems, stream));
      }
      tiled_w.push_back(std::move(t));
    }
    for (const int m : o.ms) {
      const kernels::GemvParams base{x.as<__nv_bfloat16>(), nullptr, nullptr, s.y_f32, m, s.n, s.k};
      std::vector<Variant> variants;
      if (o.legacy && (m == 1 || m == 2 || m == 4 || m == 8)) {
        variants.push_back({"legacy", [base](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
                              kernels::GemvParams p = base;
                              p.w = wp, p.y = yp;
                              RTGEN_CUDA_RETURN_IF_ERROR(bench::LegacyGemv(p, st));
                              return absl::OkStatus();
                            }});
      }
      if (m <= kernels::kGemvMaxRows) {
        variants.push_back({"gemv", [base](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
                              kernels::GemvParams p = base;
                              p.w = wp, p.y = yp;
                              RTGEN_CUDA_RETURN_IF_ERROR(kernels::Gemv(p, st));
                              return absl::OkStatus();
                            }});
        if (o.sweep) {
          for (const int warps : {1, 2, 4, 8}) {
            for (const int unroll : {2, 4, 8}) {
              variants.push_back(
                  {absl::StrCat(warps, ",", unroll),
                   [base, warps, unroll](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
                     kernels::GemvParams p = base;
                     p.w = wp, p.y = yp;
                     RTGEN_CUDA_RETURN_IF_ERROR(kernels::GemvTuned(p, {warps, unroll}, st));
                     return absl::OkStatus();
                   }});
            }
          }
        }
      }
      // At one row, both one-row kernels of large weights whatever the default picks: the
      // row-streaming one (gemv_rows.h) and the slab one (gemv_slab.h).
      for (const bool slab : {false, true}) {
        kernels::GemvTuning tuning;
        tuning.rows = true;
        tuning.slab = slab;
        const bool fits =
            !slab || kernels::GemvSlabFits(base, {}, kernels::GemvRowsEpilogue::kStore);
        if (m != 1 || !fits) continue;
        variants.push_back(
            {slab ? "slab" : "rows", [base, tuning](const __nv_bfloat16* wp, void* yp,
                                                    cudaStream_t st) {
               kernels::GemvParams p = base;
               p.w = wp, p.y = yp;
               RTGEN_CUDA_RETURN_IF_ERROR(kernels::GemvTuned(p, tuning, st));
               return absl::OkStatus();
             }});
      }
      for (const int tile : {128, 256}) {
        const kernels::HopperGemmParams h{x.as<__nv_bfloat16>(), nullptr, nullptr, s.y_f32, m,
                                          s.n, s.k, false, tile};
        if (!hopper || !kernels::HopperGemmSupported(h, hopper_ws)) continue;
        variants.push_back(
            {absl::StrCat("hopper", tile),
             [h, &hopper_ws](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
               kernels::HopperGemmParams q = h;
               q.w = wp, q.y = yp;
               RTGEN_CUDA_RETURN_IF_ERROR(kernels::HopperGemm(q, hopper_ws, st));
               return absl::OkStatus();
             }});
        // The same from the tiled copy of whichever copy of w the launch reads.
        const __nv_bfloat16* w0 = w.as<__nv_bfloat16>();
        const __nv_bfloat16* t0 = tiled_w[tile / 256].as<__nv_bfloat16>();
        const size_t t_elems = tiled_elems[tile / 256];
        variants.push_back(
            {absl::StrCat("hopper_tiled", tile),
             [h, &hopper_ws, w0, t0, t_elems, w_elems](const __nv_bfloat16* wp, void* yp,
                                                       cudaStream_t st) {
               kernels::HopperGemmParams q = h;
               q.w = nullptr, q.y = yp;
               q.w_tiled = t0 + static_cast<size_t>(wp - w0) / w_elems * t_elems;
               RTGEN_CUDA_RETURN_IF_ERROR(kernels::HopperGemm(q, hopper_ws, st));
               return absl::OkStatus();
             }});
      }
      kernels::MatmulContext* heur = heur_ctx.get();
      variants.push_back(
          {"heur0", [base, heur](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
             return kernels::Matmul(*heur, {base.x, wp, yp, base.y_f32, base.m, base.n, base.k},
                                    st);
           }});
      kernels::MatmulContext* blas = blas_ctx.get();
      variants.push_back(
          {"cublaslt", [base, blas](const __nv_bfloat16* wp, void* yp, cudaStream_t st) {
             return kernels::Matmul(*blas, {base.x, wp, yp, base.y_f32, base.m, base.n, base.k},
                                    st);
           }});

      // Reference output (cuBLASLt on copy 0); also creates (tunes) its plan before any capture.
      const size_t y_count = static_cast<size_t>(m) * s.n;
      RETURN_IF_ERROR(variants.back().fn(w.as<__nv_bfloat16>(), y_ref.get(), stream));
      RETURN_IF_ERROR(variants[variants.size() - 2].fn(w.as<__nv_bfloat16>(), y.get(), stream));
      RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      ASSIGN_OR_RETURN(const std::vector<double> ref, ReadOutput(y_ref.get(), y_count, s.y_f32));

      const double bytes = static_cast<double>(w_bytes) + 2.0 * m * s.k + 1.0 * y_elem * m * s.n;
      const double est = bytes / bw + 3e-6;
      const int launches = std::clamp(static_cast<int>(2e-3 / est), 8, 400);
      double legacy_t = NAN, gemv_t = NAN, blas_t = NAN, heur_t = NAN, best_t = INFINITY, max_err = 0.0;
      std::string best_name = "-";
      std::string hopper_line;
      for (const Variant& v : variants) {
        RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.get(), 0xff, y_count * y_elem, stream));
        RETURN_IF_ERROR(v.fn(w.as<__nv_bfloat16>(), y.get(), stream));
        RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        ASSIGN_OR_RETURN(const std::vector<double> got, ReadOutput(y.get(), y_count, s.y_f32));
        const double err = RelL2(got, ref);
        max_err = std::max(max_err, err);
        if (!(err <= (s.y_f32 ? 1e-3 : 1e-2))) {
          failure = absl::InternalError(absl::StrCat(s.model, " ", s.name, " m=", m, " variant ",
                                                     v.name, ": rel L2 ", err, " vs cuBLASLt"));
          std::fprintf(stderr, "%s\n", failure.ToString().c_str());
        }
        ASSIGN_OR_RETURN(const double t, TimeGraph(v.fn, w.as<__nv_bfloat16>(), w_elems, copies,
                                                   launches, y.get(), o.repeats, stream));
        if (v.name == "legacy") {
          legacy_t = t;
        } else if (v.name == "gemv") {
          gemv_t = t;
        } else if (v.name == "cublaslt") {
          blas_t = t;
        } else if (v.name == "heur0") {
          heur_t = t;
        } else if (v.name.rfind("hopper", 0) == 0 || v.name == "rows" || v.name == "slab") {
          absl::StrAppend(&hopper_line, " ", v.name, " ", absl::SixDigits(t * 1e6), " us (",
                          absl::SixDigits(100.0 * bytes / t / bw), " %)");
        }
        if (v.name != "legacy" && v.name != "cublaslt" && v.name != "heur0" && t < best_t) {
          best_t = t;
          best_name = v.name == "gemv" ? "default" : v.name;
        }
      }
      const auto pct = [&](double t) { return 100.0 * bytes / t / bw; };
      std::printf(
          "%-13s %-8s %6d %5d %2d %8.2f | %9.2f %9.2f %6.0f %5.1f%% | %9.2f %5.1f%% | %18s | %9.2f "
          "%5.1f%% | %9.2f %5.1f%% | %8.1e\n",
          s.model.c_str(), s.name.c_str(), s.n, s.k, m, bytes / 1e6, legacy_t * 1e6,
          gemv_t * 1e6, bytes / gemv_t / 1e9, pct(gemv_t), best_t * 1e6, pct(best_t),
          best_name.c_str(), blas_t * 1e6, pct(blas_t), heur_t * 1e6, pct(heur_t), max_err);
      if (!hopper_line.empty()) std::printf("   %s\n", hopper_line.c_str());
      std::printf("    cublaslt: %s\n    heur0:    %s\n",
                  blas->PlanInfo(m, s.n, s.k, s.y_f32).c_str(),
                  heur->PlanInfo(m, s.n, s.k, s.y_f32).c_str());
      std::fflush(stdout);
    }
  }
  cudaStreamDestroy(stream);
  return failure;
}

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  out->clear();
  const std::vector<std::string> parts = absl::StrSplit(text, ',', absl::SkipEmpty());
  for (const std::string& part : parts) {
    if constexpr (std::is_same_v<T, int>) {
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || v <= 0) return false;
      out->push_back(static_cast<int>(v));
    } else {
      out->push_back(part);
    }
  }
  return !out->empty();
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool ok = true;
    if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "--no-legacy") {
      o.legacy = false;
    } else if (i + 1 < argc && a == "--m") {
      ok = ParseList(argv[++i], &o.ms);
    } else if (i + 1 < argc && a == "--models") {
      ok = ParseList(argv[++i], &o.models);
    } else if (i + 1 < argc && a == "--repeats") {
      if (!tools::ParseIntFlag("--repeats", argv[++i], 1, 1000, &o.repeats)) return 2;
    } else if (i + 1 < argc && a == "--device") {
      if (!tools::ParseIntFlag("--device", argv[++i], 0, 1023, &o.device)) return 2;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: rtgen-gemv-bench [--m 1,2,4,8,16,32,64] "
                   "[--models smollm2-135m,llama3-8b] "
                   "[--repeats 9] [--sweep] [--no-legacy] [--device 0]\n");
      return 2;
    }
  }
  // The names before any device work (Run reads them again).
  if (absl::StatusOr<std::vector<Shape>> named = Shapes(o.models); !named.ok()) {
    std::fprintf(stderr, "rtgen-gemv-bench: %s\n", std::string(named.status().message()).c_str());
    return 2;
  }
  const absl::Status st = Run(o);
  if (!st.ok()) {
    std::fprintf(stderr, "rtgen-gemv-bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
