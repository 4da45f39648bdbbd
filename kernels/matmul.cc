#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <vector>

#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/env_switch.h"
#include "kernels/gemv.h"
#include "kernels/l2_flush.h"
#include "kernels/matmul.h"
#include "kernels/matmul_search.h"
#include "kernels/rope.h"
#include "kernels/silu_mul.h"

namespace rtgen::kernels {
namespace {

// RTGEN_SWIGLU_GEMV: "0" never fuses gate_up with SiLU·mul (A/B), "all" also routes m <= 8 shapes
// with n > 16384 (Llama-3-8B's gate_up) to the fused GEMV; otherwise fused where the GEMV runs.
int SwiGluGemvMode() {  // 0, 1 (the default) or 2 ("all")
  static const int mode = EnvChoice("RTGEN_SWIGLU_GEMV", {"0", "1", "all"}, 1);
  return mode;
}

// The GEMV for small batches, except where cuBLASLt measured faster on the H200
// (rtgen-gemv-bench, docs/perf/gpu_notes.md): many output features (n > 16384: LM heads,
// Llama-3-8B's gate+up; there cuBLASLt streams at 4.1-4.2 TB/s against the GEMV's 3.9-4.1)
// and 9..16 rows of a weight over 4 Mi elements. Wide shapes of 1-4 rows with k <= 2048 (the LM
// heads of SmolLM2-135M and Llama-3.2-1B at batch 1-4) still take the GEMV: inside the decode
// graph it is a programmatic dependent and cuBLASLt is not, and the step measured faster with it
// (session 7, two runs each: SmolLM2 b1 0.582 / 0.584 -> 0.570 / 0.573 ms, 1B b1 0.973 / 0.959
// -> 0.953 / 0.956; no gain at 1B b8 or at Llama-3-8B's k = 4096).
// At one row, large weights with many features stream by rows (gemv.h GemvTuning::rows), the
// wide ones included: fused with SiLU·mul and a programmatic dependent, Llama-3-8B's gate_up, down
// and LM head took the batch-1 step from 4.45 to 4.22 ms (session 11).
// RTGEN_GEMV_WIDE (A/B): "0" never gives n > 16384 to the GEMV but at one row of a weight the
// row-streaming kernel takes (RTGEN_GEMV_ROWS_MIN_MB=0 turns that off too), "all" always at
// m <= 8.
// Past 16 rows only small weights (SmolLM2-135M's layers) stay on the GEMV, in slices of 16 rows
// (gemv.h kGemvMaxSlicedRows), up to kGemvSlicedRows: each slice reads the weight again, from L2
// mostly, which costs less than cuBLASLt's launch and its separate norm, RoPE and SiLU·mul
// launches. Measured on the H200 (session 41, graph TPOT ms at 64 steps, two rounds, sliced
// against cuBLASLt): SmolLM2-135M b24 0.679 / 0.684 vs 0.843 / 0.832, b32 0.697 / 0.700 vs 0.861
// / 0.855, b48 0.847 / 0.854 vs 0.914 / 0.910, but b64 0.933 / 0.938 vs 0.925 / 0.864 (b16 level);
// TTFT at 24-32 tokens 0.76 vs 1.04-1.16 ms, at 48-64 0.96-0.98 vs 1.06-1.19.
// Sliced only under kGemvSlicedMaxElems weight elements: SmolLM2's layers (<= 1.8 Mi), not
// Llama-3.2-1B's o projection (exactly 4 Mi, not measured sliced).
// RTGEN_GEMV_SLICED_ROWS=N: the GEMV up to N rows, N in [16, 64] (16: none sliced; A/B).
constexpr int32_t kGemvSlicedRows = 48;
constexpr int64_t kGemvSlicedMaxElems = int64_t{2} << 20;
int32_t GemvMaxRows() {
  static const int32_t rows = [] {
    return static_cast<int32_t>(
        EnvIntIn("RTGEN_GEMV_SLICED_ROWS", kGemvMaxRows, kGemvMaxSlicedRows, kGemvSlicedRows));
  }();
  return rows;
}

bool GemvShape(const MatmulParams& p, bool any_n) {
  // 0, 1 (the default) or 2 ("all")
  static const int wide = EnvChoice("RTGEN_GEMV_WIDE", {"0", "1", "all"}, 1);
  if (p.m > GemvMaxRows()) return false;
  if (p.m > kGemvMaxRows) return int64_t{p.n} * p.k <= kGemvSlicedMaxElems;
  if (p.m > 8) return int64_t{p.n} * p.k <= (int64_t{4} << 20);
  // One row of a large weight streams by rows, LM heads and Llama-3-8B's gate_up included.
  if (GemvStreamsRows({p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k})) return true;
  const bool wide_ok = wide == 2 || (wide == 1 && p.m <= 4 && p.k <= 2048);
  return any_n || p.n <= 16384 || wide_ok;
}

// Whether Matmul runs p on the GEMV (the first choice where the context uses it).
bool GemvTakes(const MatmulContext& ctx, const MatmulParams& p) {
  return ctx.use_gemv() && GemvShape(p, false) &&
         GemvSupported({p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k, p.link, p.merged});
}

// Runs p on HopperGemm (into y; with silu_mul, act = silu(gate) * up) where the context enables it
// for p's rows and the kernel takes the shape: what the GEMV leaves, before cuBLASLt. False when
// it did not run (nothing was launched).
absl::StatusOr<bool> RanOnHopper(const MatmulContext& ctx, const MatmulParams& p, void* y,
                                 bool silu_mul, cudaStream_t stream) {
  const HopperGemmWorkspace* ws = ctx.HopperFor(p.m);
  if (ws == nullptr || p.link.any() || p.merged.on()) return false;
  HopperGemmParams h;
  h.x = p.x, h.w = p.w, h.y = y, h.y_f32 = p.y_f32, h.m = p.m, h.n = p.n, h.k = p.k;
  h.silu_mul = silu_mul;
  if (!HopperGemmSupported(h, *ws)) return false;
  RTGEN_CUDA_RETURN_IF_ERROR(HopperGemm(h, *ws, stream));
  return true;
}

// RTGEN_MATMUL_TUNE: "0" takes the heuristic's first answer, "wide" also times the wide search's
// configurations (matmul_search.h), anything else the heuristic's list and its split-K variants.
// Read at start-up, when a context is created or a shape tuned.
enum class TuneMode { kOff, kList, kWide };
TuneMode TuneModeFromEnv() {
  switch (EnvChoice("RTGEN_MATMUL_TUNE", {"0", "1", "wide"}, 1)) {
    case 0: return TuneMode::kOff;
    case 2: return TuneMode::kWide;
    default: return TuneMode::kList;
  }
}

// RTGEN_MATMUL_SHIPPED=0: the shipped tables of tuned choices are not consulted (A/B).
bool ShippedTableOn() {
  static const bool on = EnvOnUnlessZero("RTGEN_MATMUL_SHIPPED");
  return on;
}

// The process's tune cache: RTGEN_MATMUL_TUNE_CACHE's file, loaded once, by the first context
// that tunes (null when unset). A malformed file is an error then, naming it.
absl::StatusOr<std::shared_ptr<MatmulTuneCache>> ProcessTuneCache() {
  static const auto* cache = new absl::StatusOr<std::shared_ptr<MatmulTuneCache>>(
      []() -> absl::StatusOr<std::shared_ptr<MatmulTuneCache>> {
        const std::string path = EnvValue("RTGEN_MATMUL_TUNE_CACHE");
        if (path.empty()) return nullptr;
        ASSIGN_OR_RETURN(MatmulTuneCache c, MatmulTuneCache::Load(path));
        return std::make_shared<MatmulTuneCache>(std::move(c));
      }());
  return *cache;
}

// "NVIDIA H200 sm_90 132 SMs cublasLt 130100": what a cached choice is valid and fast for.
absl::StatusOr<std::string> DeviceTag(int device) {
  cudaDeviceProp prop{};
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  return absl::StrCat(prop.name, " sm_", prop.major, prop.minor, " ", prop.multiProcessorCount,
                      " SMs cublasLt ", cublasLtGetVersion());
}

MatmulTuneCache::AlgoBytes ToBytes(const cublasLtMatmulAlgo_t& algo) {
  static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(MatmulTuneCache::AlgoBytes));
  MatmulTuneCache::AlgoBytes bytes;
  std::memcpy(bytes.data(), &algo, sizeof(algo));
  return bytes;
}

cublasLtMatmulAlgo_t FromBytes(const MatmulTuneCache::AlgoBytes& bytes) {
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, bytes.data(), sizeof(algo));
  return algo;
}

// Tuned algorithms of the process, by (device, m, n, k, fp32 output): every context runs the same
// algorithm for a shape. The mutex is held while a shape is tuned (concurrent tuning would
// disturb the timings anyway).
struct TunedAlgo {
  cublasLtMatmulAlgo_t algo;
  std::string info;
  bool shipped = false;  // taken from the shipped table: never written to a tune-cache file
};
std::mutex& TunedMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
// Keyed by (device, m, n, k, fp32 output, accumulate): an accumulating call (β = 1, in place) is
// timed as it runs.
using TunedKey = std::tuple<int, int32_t, int32_t, int32_t, bool, bool>;
std::map<TunedKey, TunedAlgo>& TunedAlgos() {
  static auto* algos = new std::map<TunedKey, TunedAlgo>();
  return *algos;
}

std::string AlgoInfo(const cublasLtMatmulAlgo_t& algo) {
  int32_t id = -1, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile),
                                       &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                       sizeof(stages), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                       sizeof(splitk), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                       sizeof(reduction), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                       sizeof(swizzle), &written);
  return absl::StrCat("algo ", id, " tile ", tile, " stages ", stages, " splitk ", splitk,
                      " reduction ", reduction, " swizzle ", swizzle);
}

// Owns a device allocation and two events for the timing runs.
struct TuneScratch {
  void* flush = nullptr;
  void* y = nullptr;  // an accumulating call's stand-in output
  cudaEvent_t start = nullptr, stop = nullptr;
  ~TuneScratch() {
    if (flush) cudaFree(flush);
    if (y) cudaFree(y);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

std::string MatmulAlgoInfo(const MatmulTuneCache::AlgoBytes& algo) {
  return AlgoInfo(FromBytes(algo));
}

const char* MatmulTuneModeName() {
  return TuneModeFromEnv() == TuneMode::kWide ? "wide" : "list";
}

absl::StatusOr<std::unique_ptr<MatmulContext>> MatmulContext::Create(bool use_gemv) {
  return Create(use_gemv, TuneModeFromEnv() != TuneMode::kOff);
}

absl::StatusOr<std::unique_ptr<MatmulContext>> MatmulContext::Create(bool use_gemv, bool tune) {
  std::unique_ptr<MatmulContext> ctx(new MatmulContext());
  ctx->use_gemv_ = use_gemv;
  ctx->tune_ = tune;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&ctx->handle_));
  ASSIGN_OR_RETURN(ctx->workspace_, DeviceBuffer::Allocate(kWorkspaceBytes));
  int device = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (tune) {  // only a tuning context reads the tune cache, keyed by the device's tag
    ASSIGN_OR_RETURN(ctx->device_tag_, DeviceTag(device));
    ASSIGN_OR_RETURN(ctx->tune_cache_, ProcessTuneCache());
  }
  // HopperGemm is opt-in (RTGEN_HOPPER_GEMM=1 or =all): on the H200 it measured slower than
  // cuBLASLt at Llama-3-8B's decode shapes (docs/perf/gpu_notes.md, session 15).
  const int hopper_choice = EnvChoice("RTGEN_HOPPER_GEMM", {"0", "1", "all"}, 0);
  const bool hopper_wanted = hopper_choice >= 1;
  if (use_gemv && hopper_wanted && HopperGemmAvailable(device)) {
    int sms = 0;
    RTGEN_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    void* partials = nullptr;
    void* counters = nullptr;
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&partials, HopperGemmPartialBytes(sms)));
    ctx->hopper_.partials = static_cast<float*>(partials);
    const size_t counter_bytes = kHopperGemmMaxTiles * sizeof(uint32_t);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&counters, counter_bytes));
    ctx->hopper_.counters = static_cast<uint32_t*>(counters);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemset(counters, 0, counter_bytes));
    // Zero before any stream uses them (the engine's streams do not wait for the legacy one).
    RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    ctx->hopper_.ctas = sms;
    ctx->hopper_min_rows_ = hopper_choice == 2 ? 1 : 9;
  }
  return ctx;
}

void MatmulContext::DestroyPlanHandles(const Plan& plan) {
  if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c != nullptr) cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
}

MatmulContext::~MatmulContext() {
  // Destructors cannot report errors; the calls below only release resources.
  for (auto& [key, plan] : plans_) DestroyPlanHandles(plan);
  if (hopper_.partials) cudaFree(hopper_.partials);
  if (hopper_.counters) cudaFree(hopper_.counters);
  if (handle_) cublasLtDestroy(handle_);
}

std::string MatmulContext::PlanInfo(int32_t m, int32_t n, int32_t k, bool y_f32,
                                    bool accumulate) const {
  const auto it = plans_.find(std::make_tuple(m, n, k, y_f32, accumulate));
  return it == plans_.end() ? std::string() : it->second.info;
}

// RTGEN_MATMUL_TUNE_RANKED=path: a tuned shape's finalists (the candidates timed kReps times, up
// to kTuneCandidates; the wide search's others, timed once, are not) appended to `path`, fastest
// first, one tune-cache line each (its note: rank, candidate and median), so that a candidate can
// be run in the decode step on its own (a one-line RTGEN_MATMUL_TUNE_CACHE file; scripts/device/
// matmul_in_step.sh) rather than judged by its time alone. Tuning's choice is unchanged.
void MatmulContext::AppendRanked(const MatmulParams& p,
                                 const std::vector<cublasLtMatmulAlgo_t>& cands,
                                 std::vector<std::pair<float, size_t>> timed) const {
  const char* path = EnvValue("RTGEN_MATMUL_TUNE_RANKED");
  if (path[0] == '\0') return;
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string text;
  for (size_t r = 0; r < timed.size(); ++r) {
    const auto& [us, i] = timed[r];
    absl::StrAppend(&text, MatmulTuneCache::FormatLine(
                               device_tag_, MatmulTuneModeName(),
                               {p.m, p.n, p.k, p.y_f32, p.accumulate},
                               {ToBytes(cands[i]),
                                absl::StrCat(AlgoInfo(cands[i]), "; rank ", r, " of ",
                                             timed.size(), ", candidate ", i, ", ",
                                             absl::SixDigits(us), " us alone")}));
  }
  std::FILE* f = std::fopen(path, "a");
  const bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f == nullptr || std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "rtgen: RTGEN_MATMUL_TUNE_RANKED: cannot append to %s\n", path);
  }
}

absl::Status MatmulContext::Tune(const MatmulParams& p, cudaStream_t stream, Plan* plan) {
  cublasLtMatmulPreference_t pref = nullptr;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  constexpr int kAsk = 16;
  cublasLtMatmulHeuristicResult_t results[kAsk] = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                        pref, kAsk, results, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  RTGEN_CUBLAS_RETURN_IF_ERROR(st);
  std::vector<cublasLtMatmulAlgo_t> cands;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= ws) {
      cands.push_back(results[i].algo);
    }
  }
  if (cands.empty()) {
    return absl::InternalError(absl::StrCat("cuBLASLt has no bf16 algorithm for m=", p.m,
                                            " n=", p.n, " k=", p.k));
  }
  // Split-K variants of the heuristic's unsplit algorithms: few output tiles (small m and n)
  // leave SMs idle; k split 2/4/8 ways (each part >= 256 long) multiplies the CTAs. Reduction in
  // a separate pass over the workspace (fixed order) where the algorithm offers it.
  const size_t from_heuristic = cands.size();
  for (size_t i = 0; i < from_heuristic; ++i) {
    int32_t splitk_support = 0, splitk = 1;
    uint32_t schemes = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&cands[i], CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                          &splitk_support, sizeof(splitk_support),
                                          &written) != CUBLAS_STATUS_SUCCESS ||
        splitk_support == 0 ||
        cublasLtMatmulAlgoCapGetAttribute(&cands[i], CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK,
                                          &schemes, sizeof(schemes),
                                          &written) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigGetAttribute(&cands[i], CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                             sizeof(splitk), &written) != CUBLAS_STATUS_SUCCESS ||
        splitk > 1) {
      continue;
    }
    const uint32_t scheme = FirstReductionScheme(schemes);
    if (scheme == 0) continue;
    for (const int32_t split : {2, 4, 8}) {
      if (p.k / split < 256 || static_cast<int>(cands.size()) >= kTuneCandidates) break;
      cublasLtMatmulAlgo_t a = cands[i];
      if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                               sizeof(split)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                               sizeof(scheme)) == CUBLAS_STATUS_SUCCESS &&
          AlgoFits(handle_, plan->desc, plan->a, plan->b, plan->c, a, ws)) {
        cands.push_back(a);
      }
    }
  }

  // RTGEN_MATMUL_TUNE=wide: the heuristic's algorithms in more configurations (matmul_search.h).
  if (TuneModeFromEnv() == TuneMode::kWide) {
    std::vector<int> ids;
    for (size_t i = 0; i < from_heuristic; ++i) {
      int32_t id = -1;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&cands[i], CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                           &written);
      if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    const std::vector<cublasLtMatmulAlgo_t> all =
        EnumerateMatmulAlgos(handle_, plan->desc, plan->a, plan->b, plan->c,
                             p.y_f32 ? CUDA_R_32F : CUDA_R_16BF, ids, ws, kWideSearchMax);
    cands.insert(cands.end(), all.begin(), all.end());
  }

  // Each candidate: one untimed run (module load), then kReps runs, each after an L2 eviction;
  // the median decides, the earlier candidate on a tie. Past kTuneCandidates (the wide search),
  // one timed run each first, and only the heuristic's first and the fastest others go on (a tie
  // then goes to the earlier in that ranking).
  TuneScratch scratch;
  int device = 0, l2 = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  const size_t flush_bytes = std::max<size_t>(size_t{2} * l2, size_t{64} << 20);
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch.flush, flush_bytes));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.flush, 0x5a, flush_bytes, stream));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&scratch.start));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&scratch.stop));
  constexpr int kReps = 5;
  // An accumulating call is timed as it runs (β = 1, in place), on a zeroed copy of its shape so
  // that its own output is left as it was.
  void* y = p.y;
  if (p.accumulate) {
    const size_t y_bytes = size_t{1} * p.m * p.n * (p.y_f32 ? sizeof(float) : 2);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch.y, y_bytes));
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.y, 0, y_bytes, stream));
    y = scratch.y;
  }
  const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
  // The median of `reps` timed runs of candidate i; NaN where cuBLASLt rejects it.
  const auto median_us = [&](size_t i, int reps) -> absl::StatusOr<float> {
    std::vector<float> us;
    for (int r = 0; r <= reps; ++r) {
      RTGEN_CUDA_RETURN_IF_ERROR(L2FlushRead(scratch.flush, flush_bytes, stream));
      RTGEN_CUDA_RETURN_IF_ERROR(cudaEventRecord(scratch.start, stream));
      const bool ok = cublasLtMatmul(handle_, plan->desc, &alpha, p.w, plan->a, p.x, plan->b,
                                     &beta, y, plan->c, y, plan->c, &cands[i],
                                     workspace_.get(), kWorkspaceBytes,
                                     stream) == CUBLAS_STATUS_SUCCESS;
      RTGEN_CUDA_RETURN_IF_ERROR(cudaEventRecord(scratch.stop, stream));
      RTGEN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(scratch.stop));
      if (!ok) {
        cudaGetLastError();  // a rejected candidate launched nothing; clear any launch error
        return NAN;
      }
      float ms = 0.0f;
      RTGEN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, scratch.start, scratch.stop));
      if (r > 0) us.push_back(ms * 1e3f);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  std::vector<size_t> order(cands.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (cands.size() > static_cast<size_t>(kTuneCandidates)) {
    std::vector<float> once(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      ASSIGN_OR_RETURN(once[i], median_us(i, 1));
      if (std::isnan(once[i])) once[i] = std::numeric_limits<float>::infinity();
    }
    std::stable_sort(order.begin() + 1, order.end(),
                     [&](size_t x, size_t y) { return once[x] < once[y]; });
    order.resize(kTuneCandidates);
  }
  int best = -1;
  float best_us = std::numeric_limits<float>::infinity(), first_us = NAN;
  std::vector<std::pair<float, size_t>> timed;  // (median us, candidate) of the finalists
  for (const size_t i : order) {
    ASSIGN_OR_RETURN(const float median, median_us(i, kReps));
    if (std::isnan(median)) continue;
    timed.emplace_back(median, i);
    if (i == 0) first_us = median;
    if (median < best_us) best = static_cast<int>(i), best_us = median;
  }
  AppendRanked(p, cands, timed);
  if (best < 0) {
    return absl::InternalError(absl::StrCat("cuBLASLt: no candidate ran for m=", p.m, " n=", p.n,
                                            " k=", p.k));
  }
  if (best > 0 && best_us > first_us * (1.0f - kTuneMargin)) {  // NaN first_us: it did not run
    best = 0;
    best_us = first_us;
  }
  plan->algo = cands[best];
  plan->info = absl::StrCat(AlgoInfo(plan->algo), "; tuned: candidate ", best, " of ",
                            cands.size(), " (", from_heuristic, " from the heuristic) ",
                            absl::SixDigits(best_us), " us vs ", absl::SixDigits(first_us),
                            " us for the heuristic's first");
  return absl::OkStatus();
}

// Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = (w^T)^T[n,k] x^T[k,m]:
// A = w seen column-major as [k, n] (transposed), B = x seen column-major as [k, m].
absl::StatusOr<const MatmulContext::Plan*> MatmulContext::GetPlan(const MatmulParams& p,
                                                                  cudaStream_t stream) {
  const int32_t m = p.m, n = p.n, k = p.k;
  const bool y_f32 = p.y_f32;
  const auto key = std::make_tuple(m, n, k, y_f32, p.accumulate);
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  Plan plan;
  // Until the plan is stored, an error return releases what it has created (a failed tuning in
  // the warm-ups is retried with the next KV allocation, and would leak a plan a try).
  struct ReleaseUnlessStored {
    const Plan& plan;
    bool stored = false;
    ~ReleaseUnlessStored() {
      if (!stored) DestroyPlanHandles(plan);
    }
  } release{plan};
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, k));
  RTGEN_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan.c, y_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));

  bool chosen = false;
  if (tune_ && m <= kTuneMaxRows) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
      int device = 0;
      RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
      const TunedKey tuned_key{device, m, n, k, y_f32, p.accumulate};
      const MatmulTuneCache::Shape shape{m, n, k, y_f32, p.accumulate};
      std::lock_guard<std::mutex> lock(TunedMutex());
      auto& tuned = TunedAlgos();
      const char* mode = MatmulTuneModeName();
      std::string rejected;  // said in the plan's info when a listed entry could not be used
      // An entry of `source` that cuBLASLt still accepts for this shape is the choice.
      const auto take = [&](const std::optional<MatmulTuneCache::Entry>& entry,
                            const char* source, bool shipped) {
        if (!entry) return false;
        const cublasLtMatmulAlgo_t algo = FromBytes(entry->algo);
        if (!AlgoFits(handle_, plan.desc, plan.a, plan.b, plan.c, algo, kWorkspaceBytes)) {
          absl::StrAppend(&rejected, source, "'s entry was rejected by cuBLASLt; ");
          // Said, not only noted: the next choice (the shipped table's) is not written over the
          // file's line, so nothing else shows that a cached choice did not run.
          std::fprintf(stderr, "rtgen: %s's entry for m=%d n=%d k=%d (%s) was rejected by "
                       "cuBLASLt\n", source, m, n, k, entry->note.c_str());
          return false;
        }
        plan.algo = algo;
        plan.info = absl::StrCat("from ", source, " (", entry->note, ")");
        tuned.insert_or_assign(tuned_key, TunedAlgo{plan.algo, plan.info, shipped});
        return true;
      };
      // The tune cache first, then the shipped tables (the wide search's choices on GPUs like
      // this one) unless RTGEN_MATMUL_SHIPPED=0.
      const bool from_file = tune_cache_ && take(tune_cache_->Find(device_tag_, mode, shape),
                                                 "the tune cache", /*shipped=*/false);
      chosen = from_file ||
               (ShippedTableOn() &&
                take(MatmulTuneCache::Shipped().Find(device_tag_, "wide", shape),
                     "the shipped table", /*shipped=*/true));
      const auto it = tuned.find(tuned_key);
      // A choice of this process the file lacks. Not the shipped table's: in the file it would
      // be taken first on the next run, RTGEN_MATMUL_SHIPPED=0 or not (an A/B measuring the
      // shipped choice twice), and the table is in the binary anyway.
      bool add_to_cache = false;
      if (!chosen && it != tuned.end()) {
        plan.algo = it->second.algo;
        plan.info = it->second.info;
        chosen = true;
        add_to_cache = !it->second.shipped;
      } else if (!chosen && tuning_allowed_) {
        RETURN_IF_ERROR(Tune(p, stream, &plan));
        plan.info = rejected + plan.info;
        tuned.emplace(tuned_key, TunedAlgo{plan.algo, plan.info, /*shipped=*/false});
        chosen = add_to_cache = true;
      }
      // The file is an optimisation: a failed write is reported and serving goes on.
      if (add_to_cache && tune_cache_) {
        const absl::Status st =
            tune_cache_->Put(device_tag_, mode, shape, {ToBytes(plan.algo), plan.info});
        if (!st.ok()) std::fprintf(stderr, "rtgen: %s\n", std::string(st.message()).c_str());
      }
    }
  }
  if (!chosen) {
    cublasLtMatmulPreference_t pref = nullptr;
    RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                          pref, 1, &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    RTGEN_CUBLAS_RETURN_IF_ERROR(st);
    if (found == 0) {
      return absl::InternalError(absl::StrCat("cuBLASLt has no bf16 algorithm for m=", m, " n=",
                                              n, " k=", k));
    }
    plan.algo = result.algo;
    plan.info = absl::StrCat(AlgoInfo(plan.algo), "; the heuristic's first");
  }
  release.stored = true;
  return &plans_.emplace(key, plan).first->second;
}

bool MatmulTakesNormLink(const MatmulContext& ctx, const MatmulParams& p) {
  return p.m >= 1 && p.m <= kGemvMaxLinkRows &&
         GemvTakes(ctx, {p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k});
}

bool MatmulTakesMergedInput(const MatmulContext& ctx, const MatmulParams& p) {
  return p.merged.on() && !p.accumulate && GemvTakes(ctx, p);
}

bool MatmulRunsOnCublas(const MatmulContext& ctx, const MatmulParams& p) {
  return p.accumulate || (!GemvTakes(ctx, p) && ctx.HopperFor(p.m) == nullptr);
}

absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream) {
  if (p.m <= 0) return absl::OkStatus();
  if (p.accumulate && p.link.any()) {
    return absl::InvalidArgumentError("Matmul: accumulate takes no norm link");
  }
  if (!p.accumulate && GemvTakes(ctx, p)) {
    RTGEN_CUDA_RETURN_IF_ERROR(
        Gemv({p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k, p.link, p.merged}, stream));
    return absl::OkStatus();
  }
  if (p.merged.on()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: a merged input row needs the tensor-core GEMV at one row (m=", p.m, " n=", p.n,
        " k=", p.k, ")"));
  }
  if (p.link.any()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Matmul: a norm link needs the GEMV at 1..", kGemvMaxLinkRows, " rows (m=", p.m,
        " n=", p.n, " k=", p.k, ")"));
  }
  if (!p.accumulate) {
    ASSIGN_OR_RETURN(const bool ran, RanOnHopper(ctx, p, p.y, false, stream));
    if (ran) return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const MatmulContext::Plan* plan, ctx.GetPlan(p, stream));
  // In place when accumulating (C = D = y, the same layout: cuBLASLt allows it).
  const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(ctx.handle_, plan->desc, &alpha, p.w, plan->a, p.x,
                                              plan->b, &beta, p.y, plan->c, p.y, plan->c,
                                              &plan->algo, ctx.workspace_.get(),
                                              MatmulContext::kWorkspaceBytes, stream));
  return absl::OkStatus();
}

absl::Status MatmulSiluMul(MatmulContext& ctx, MatmulParams p, __nv_bfloat16* act,
                           cudaStream_t stream) {
  if (p.m <= 0) return absl::OkStatus();
  const int mode = SwiGluGemvMode();
  if (ctx.use_gemv() && mode != 0 && !p.y_f32 && GemvShape(p, mode == 2)) {
    GemvParams g{p.x, p.w, act, false, p.m, p.n, p.k, p.link};
    if (GemvSiluMulSupported(g)) {
      RTGEN_CUDA_RETURN_IF_ERROR(GemvSiluMul(g, stream));
      return absl::OkStatus();
    }
  }
  // Where Matmul would take HopperGemm, its SiLU·mul epilogue.
  if (!GemvTakes(ctx, p)) {
    ASSIGN_OR_RETURN(const bool ran, RanOnHopper(ctx, p, act, true, stream));
    if (ran) return absl::OkStatus();
  }
  RETURN_IF_ERROR(Matmul(ctx, p, stream));
  RTGEN_CUDA_RETURN_IF_ERROR(
      SiluMul({static_cast<const __nv_bfloat16*>(p.y), act, p.m, p.n / 2}, stream));
  return absl::OkStatus();
}

namespace {

// Whether the qkv projection p may take the fused RoPE GEMV (MatmulRopeKvStore). Where one launch
// instead of two measured faster on the H200 (docs/perf/gpu_notes.md): SmolLM2-135M (k = 576)
// and Llama-3.2-1B (k = 2048) gained 20-40 us per step at 1-4 rows (session 4), and at 6-8 rows
// since the norms are linked there (session 31, graph TPOT ms, 128 steps: SmolLM2 b8 0.518 ->
// 0.478-0.489, b6 0.515 -> 0.476-0.487; 1B b8 0.972-0.982 -> 0.959-0.965), and at 9-16 rows
// with the norms linked there too (session 32: SmolLM2 b9-16 0.612-0.622 -> 0.582-0.589; alone,
// without the links, level; Llama-3.2-1B b9-16 level); Llama-3-8B (k = 4096) gained 0-50 us at
// 1-2 rows and lost up to 0.14 ms at 4 (session 4).
// RTGEN_QKV_ROPE_GEMV=N (a number): up to N rows at k <= 2048 (A/B).
int32_t FusedRopeSmallKRows() {
  // Default: every GEMV row count, sliced ones too (0, off, is FusedRopeShape's).
  return static_cast<int32_t>(
      EnvIntIn("RTGEN_QKV_ROPE_GEMV", 0, kGemvMaxSlicedRows, kGemvMaxSlicedRows));
}

bool FusedRopeShape(const MatmulContext& ctx, const MatmulParams& p) {
  static const int32_t small_k_rows = FusedRopeSmallKRows();  // read once
  const bool fuse = small_k_rows != 0;  // "0" off, N rows on
  const int32_t fused_max_rows = p.k <= 2048 ? small_k_rows : 2;
  return ctx.use_gemv() && fuse && p.m <= fused_max_rows && GemvShape(p, false);
}

}  // namespace

bool MatmulFusesRope(const MatmulContext& ctx, const MatmulParams& p) {
  const GemvParams g{p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k};
  return p.m > 0 && FusedRopeShape(ctx, p) && GemvSupported(g);
}

bool MatmulTakesLink(const MatmulContext& ctx, const MatmulParams& p, bool rope) {
  const GemvParams g{p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k, p.link};
  if (rope) return p.m == 1 && FusedRopeShape(ctx, p) && GemvSupported(g);
  return p.m == 1 && !p.accumulate && GemvTakes(ctx, p);
}

bool MatmulRopeReleasesEarly(const MatmulContext& ctx, const MatmulParams& p, int32_t head_dim) {
  const GemvParams g{p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k};
  return MatmulFusesRope(ctx, p) && GemvRopeReleasesEarly(g, head_dim);
}

absl::Status MatmulRopeKvStore(MatmulContext& ctx, MatmulParams p, const RopeParams& rope,
                               const KvStoreParams& store, cudaStream_t stream) {
  if (p.m <= 0) return absl::OkStatus();
  const int32_t q_dim = rope.num_heads * rope.head_dim;
  // The fused kernel writes rows of exactly the layout RopeKvStore is given here.
  const bool same_layout = rope.q == p.y && rope.k == rope.q + q_dim &&
                           rope.row_stride == p.n && rope.num_tokens == p.m &&
                           store.k == rope.k && store.v == rope.k + store.kv_dim &&
                           store.row_stride == p.n && store.num_tokens == p.m &&
                           store.kv_dim == rope.num_kv_heads * rope.head_dim;
  // The fused GEMV applies no folded norm's scale: with one, the two launches.
  if (same_layout && !rope.norm.on() && FusedRopeShape(ctx, p)) {
    const GemvParams g{p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k, p.link};
    const GemvRopeParams r{rope.positions, rope.inv_freq,     store.slot_mapping,
                           store.k_cache,  store.v_cache,     rope.num_heads,
                           rope.num_kv_heads, rope.head_dim};
    if (GemvRopeKvStoreSupported(g, r)) {
      RTGEN_CUDA_RETURN_IF_ERROR(GemvRopeKvStore(g, r, stream));
      return absl::OkStatus();
    }
  }
  RETURN_IF_ERROR(Matmul(ctx, p, stream));
  RTGEN_CUDA_RETURN_IF_ERROR(RopeKvStore(rope, store, stream));
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
