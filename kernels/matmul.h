#pragma once
// Linear layers: y[m, n] = x[m, k] * w[n, k]^T with bf16 operands, fp32 accumulation, bf16 or fp32
// output. cuBLASLt for general shapes; where custom kernels are enabled, the GEMV (gemv.h) for
// small m and on Hopper the TMA + wgmma kernel (hopper_gemm.h) for the rest up to 64 rows (see
// Matmul for the exact routing).
// The context owns the cuBLASLt handle, a fixed workspace (so calls can be graph-captured) and a
// per-shape cache of the chosen algorithm (so a shape always runs the same algorithm: eager and
// replayed steps give bitwise equal results).
// Algorithm choice: a shape of m <= kTuneMaxRows rows first met while tuning is allowed
// (AllowTuning: the CUDA backend allows it only around the warm-up runs of its graph capture, so
// only decode batch buckets are tuned, at start-up) times up to kTuneCandidates cuBLASLt
// candidates (the heuristic's list plus split-K variants of its algorithms, each within the
// fixed workspace) with the L2 evicted before each run, and keeps the fastest if it beats the
// heuristic's first answer by more than kTuneMargin (near ties keep the heuristic's, so a
// restart rarely changes the choice, and with it the rounding). RTGEN_MATMUL_TUNE=wide adds up to
// kWideSearchMax more configurations of the heuristic's algorithms (matmul_search.h); each
// candidate is then timed once, and the heuristic's first with the fastest others
// (kTuneCandidates in all) as above. Llama-3-8B at batch 64 measured 5.19-5.20 ms -> 5.06-5.10
// with it on the H200, but its start-up took 85 s, not 1.2-1.4 (docs/perf/gpu_notes.md,
// session 20): not the default. Its choices on a GPU are shipped instead (MatmulTuneCache::
// Shipped(), kernels/tuned_matmul/*.tsv, compiled in; RTGEN_MATMUL_SHIPPED=0 ignores them):
// where a tuning context has no cache-file entry for a shape, the shipped entry for this GPU's
// tag (name, SM count, cuBLASLt version) is the choice, with no timing and whether or not tuning
// is allowed, as a cache file's entry is. A tuned choice is shared by every context of the
// process that meets the shape afterwards (an eager backend created after a graph-runner one
// runs its algorithms); a context that met the shape before it was tuned keeps the heuristic's
// plan. A backend's own eager and replayed steps share one context.
// RTGEN_MATMUL_TUNE_CACHE=path keeps the tuned choices in a file (matmul_tune_cache.h): a shape
// found there for this GPU, cuBLASLt and tuning mode (and accepted by cublasLtMatmulAlgoCheck)
// is not timed again, and every choice this process tuned is added to it (not the shipped
// table's: those stay the table's, so RTGEN_MATMUL_SHIPPED=0 still sets them aside), so the wide
// search's start-up is paid once and a restarted server runs the tuned shapes' algorithms (and
// rounds their answers) as before; a file entry cuBLASLt rejects is said on stderr. An
// accumulating call (MatmulParams::accumulate) is tuned apart, as it runs: β = 1, in place (on a
// stand-in output, so its own is left as it was).
// Every other first call (tuning not allowed and no entry, its stream being captured, larger m,
// RTGEN_MATMUL_TUNE=0) takes the heuristic's first answer: the same on every run of a given
// GPU and cuBLASLt, and no timing stalls a serving step (a prefill of a new length used to be
// tuned on the spot, and two processes could round the same prompt differently).

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"
#include "kernels/gemv.h"
#include "kernels/hopper_gemm.h"
#include "kernels/kv_store.h"
#include "kernels/matmul_tune_cache.h"
#include "kernels/rope.h"

namespace rtgen::kernels {

struct MatmulParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (HF weight layout)
  void* y = nullptr;                 // [m, n] row-major
  bool y_f32 = false;                // fp32 output (logits) instead of bf16
  int32_t m = 0;
  int32_t n = 0;
  int32_t k = 0;
  // A norm between two projections without a norm launch (gemv.h GemvNormLink); only where
  // MatmulTakesNormLink(ctx, p) holds, and as a producer only through Matmul.
  GemvNormLink link{};
  // x merged from decode attention's key partitions as it is read (gemv.h GemvMergedInput);
  // only where MatmulTakesMergedInput(ctx, p) holds.
  GemvMergedInput merged{};
  // y += x w^T in place (cuBLASLt's beta = 1 with C = D = y): Matmul only, always on cuBLASLt
  // (the residual adds of model_forward.h's folded-norm steps).
  bool accumulate = false;
};

class MatmulContext {
 public:
  static constexpr size_t kWorkspaceBytes = 32u << 20;
  static constexpr int kTuneMaxRows = 256;
  static constexpr int kTuneCandidates = 32;
  static constexpr int kWideSearchMax = 3000;  // configurations tried by the wide search
  static constexpr float kTuneMargin = 0.03f;  // a candidate must be 3 % faster than the first
  // use_gemv: route small batches (m <= 8, or <= 16 on small weights) to the custom GEMV; with
  // RTGEN_HOPPER_GEMM=1 (opt-in) also, on an sm_90a build on a compute capability 9.0 device,
  // shapes of 9..64 rows to HopperGemm (=all: every m <= 64 the GEMV leaves to cuBLASLt).
  // Tuning as RTGEN_MATMUL_TUNE says (on unless "0"). Call outside stream capture.
  static absl::StatusOr<std::unique_ptr<MatmulContext>> Create(bool use_gemv);
  static absl::StatusOr<std::unique_ptr<MatmulContext>> Create(bool use_gemv, bool tune);
  ~MatmulContext();
  MatmulContext(const MatmulContext&) = delete;
  MatmulContext& operator=(const MatmulContext&) = delete;

  bool use_gemv() const { return use_gemv_; }
  // Whether shapes of 9..64 rows (every m <= 64 with RTGEN_HOPPER_GEMM=all) go to HopperGemm.
  bool use_hopper_gemm() const { return hopper_.ctas > 0; }
  // HopperGemm's workspace where this context sends shapes of m rows to it, else nullptr.
  const HopperGemmWorkspace* HopperFor(int32_t m) const {
    return use_hopper_gemm() && m >= hopper_min_rows_ && m <= kHopperGemmMaxRows ? &hopper_
                                                                                  : nullptr;
  }
  bool tune() const { return tune_; }
  // Whether a new shape may be tuned now (off when created).
  void AllowTuning(bool allow) { tuning_allowed_ = allow; }
  // The tuned-choice file this context reads and adds to: the process's RTGEN_MATMUL_TUNE_CACHE
  // (loaded when the first tuning context is created; null when unset or when this context does
  // not tune) unless a test gives its own. Used only under the process's tuning mutex.
  void UseTuneCache(std::shared_ptr<MatmulTuneCache> cache) { tune_cache_ = std::move(cache); }
  // What a tune cache entry of this context's device is keyed by: GPU name, compute capability,
  // SM count and cuBLASLt version ("" for a context that does not tune).
  const std::string& device_tag() const { return device_tag_; }
  // The cuBLASLt algorithm this context runs for a shape ("" before its first call): ids, tile,
  // split-K, and for a tuned shape its time against the heuristic's first answer.
  std::string PlanInfo(int32_t m, int32_t n, int32_t k, bool y_f32,
                       bool accumulate = false) const;

 private:
  friend absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream);

  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::string info;
  };
  // Releases a plan's cuBLASLt objects (those created: a plan may be partly built).
  static void DestroyPlanHandles(const Plan& plan);
  MatmulContext() = default;
  absl::StatusOr<const Plan*> GetPlan(const MatmulParams& p, cudaStream_t stream);
  // Times the candidates for `plan`'s shape on p's operands; sets plan->algo and plan->info.
  absl::Status Tune(const MatmulParams& p, cudaStream_t stream, Plan* plan);
  // Tune's finalists (median us, index into cands) to RTGEN_MATMUL_TUNE_RANKED's file.
  void AppendRanked(const MatmulParams& p, const std::vector<cublasLtMatmulAlgo_t>& cands,
                    std::vector<std::pair<float, size_t>> timed) const;

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;  // kWorkspaceBytes, cuBLASLt's
  bool use_gemv_ = false;
  HopperGemmWorkspace hopper_{};  // ctas == 0: HopperGemm not used
  int hopper_min_rows_ = 9;
  bool tune_ = true;
  bool tuning_allowed_ = false;
  std::shared_ptr<MatmulTuneCache> tune_cache_;  // null: none
  std::string device_tag_;
  std::map<std::tuple<int32_t, int32_t, int32_t, bool, bool>, Plan> plans_;  // m, n, k, f32, acc
};

absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream);

// True when Matmul runs p's shape on cuBLASLt: neither the GEMV nor HopperGemm is enabled for
// it (p.accumulate always runs there).
bool MatmulRunsOnCublas(const MatmulContext& ctx, const MatmulParams& p);

// The tuning mode as the tune cache names it ("wide" for RTGEN_MATMUL_TUNE=wide, else "list"):
// choices of the wide search and of the heuristic's list are kept apart.
const char* MatmulTuneModeName();

// An algorithm's configuration as text (ids, tile, stages, split-K, reduction, swizzle): how a
// plan's info (PlanInfo) and a ranked line's note (RTGEN_MATMUL_TUNE_RANKED) begin. Host only.
std::string MatmulAlgoInfo(const MatmulTuneCache::AlgoBytes& algo);

// True when Matmul (and MatmulSiluMul, MatmulRopeKvStore) runs p's shape on the GEMV at
// 1..kGemvMaxLinkRows rows (gemv.h), which is what takes a norm link.
bool MatmulTakesNormLink(const MatmulContext& ctx, const MatmulParams& p);
// True when Matmul runs p on the GEMV with p.merged (and p.link) as given.
bool MatmulTakesMergedInput(const MatmulContext& ctx, const MatmulParams& p);
// True when Matmul (rope: MatmulRopeKvStore, as its one fused launch) runs p on the GEMV with
// p's link as given: what a link with pending products (gemv.h GemvPendingRow) must check. With
// rope, the shape and link only: a RoPE layout the fused launch refuses makes MatmulRopeKvStore
// fail with that link (an error, not a different path).
bool MatmulTakesLink(const MatmulContext& ctx, const MatmulParams& p, bool rope);

// The SwiGLU block's first half: p is the gate+up projection (w = [gate; up], n = 2 * inter, y a
// bf16 [m, n] scratch) and act[m, inter] = silu(gate) * up (silu_mul.h). Where Matmul would take
// the GEMV, one fused launch (gemv.h GemvSiluMul) that leaves p.y untouched; where it would take
// HopperGemm, that kernel's SiLU·mul epilogue (p.y untouched too); elsewhere Matmul then SiluMul.
// RTGEN_SWIGLU_GEMV=0 never fuses on the GEMV (A/B); =all also fuses there m <= 8 shapes with
// n > 16384, which Matmul gives cuBLASLt.
absl::Status MatmulSiluMul(MatmulContext& ctx, MatmulParams p, __nv_bfloat16* act,
                           cudaStream_t stream);

// The qkv projection followed by RoPE and the KV store: p.y receives the qkv rows, rope and store
// describe them as RopeKvStore takes them (rope.q == p.y). Where Matmul would take the GEMV and
// m <= 16 (m <= 2 for k > 2048), one fused launch (gemv.h GemvRopeKvStore, same results bit for
// bit; never with rope.norm on); elsewhere Matmul then RopeKvStore. RTGEN_QKV_ROPE_GEMV=0 never
// fuses, =N fuses up to N rows for k <= 2048 (A/B).
absl::Status MatmulRopeKvStore(MatmulContext& ctx, MatmulParams p, const RopeParams& rope,
                               const KvStoreParams& store, cudaStream_t stream);
// True when MatmulRopeKvStore would take p's shape to the fused GEMV (given rope and store
// parameters that suit it, which this does not check: ModelForward's always do).
bool MatmulFusesRope(const MatmulContext& ctx, const MatmulParams& p);
// True when MatmulFusesRope and that kernel, rotating heads of head_dim, lets the next launch
// start before its main loop (gemv.h GemvRopeReleasesEarly). A performance hint only: what runs
// after it must be correct either way.
bool MatmulRopeReleasesEarly(const MatmulContext& ctx, const MatmulParams& p, int32_t head_dim);

}  // namespace rtgen::kernels
