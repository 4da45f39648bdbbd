#pragma once
// Small-batch bf16 matrix-vector product for decode: y[m, n] = sum_k x[m, k] * w[n, k] for
// m <= kGemvMaxRows (past that, up to kGemvMaxSlicedRows in slices of as many), fp32
// accumulation. Weight-streaming kernel: each weight element is read once
// from memory (16-byte loads, several in flight per thread) and applied to every input row with
// one tensor-core mma (m16n8k16, the batch rows as the 16-row operand, 8 weight rows as the
// 8-column one). A block owns 8 output features; its warps split k and add their partial sums in
// a fixed order, so results are deterministic and independent of stream or graph capture.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rtgen::kernels {

constexpr int kGemvMaxRows = 16;  // rows of one mma slice
// Up to kGemvMaxSlicedRows rows run as slices of kGemvMaxRows (a grid row each): every slice
// streams the weight again, from L2 mostly since the slices run at once, so only small weights
// gain (matmul.cc GemvShape). No norm link past kGemvMaxLinkRows.
constexpr int kGemvMaxSlicedRows = 64;

// An RMSNorm between two GEMVs, done without a norm launch: at one row on either kernel, at up
// to kGemvMaxLinkRows rows on the tensor-core one. The producer (plain epilogue; p.y is not
// written) joins its products, rounded to bf16 as Gemv would store them, to the residual: for
// row r, h = residual[r] + y[r], residual[r] = h, normed[r] = bf16(h * weight) (residual and
// normed: [m, n] row-major), and adds sum(h^2) over the row in fixed point (kNormSumScale units,
// integer atomics: the total does not depend on the order of the warps) to sum_sq[r]. The
// consumer (any epilogue, x = normed) scales row r's sums by 1 / sqrt(scale_by[r] / k + eps),
// and zeroes rows 0 .. m - 1 of zero_after (the slot of the norm before, whose consumer has
// completed) for their next use; with zero_only, zero_after alone (no scale_by) zeroes and scales
// nothing (the projection before a norm that is launched, model_forward.h LinksFinalNorm; without
// the flag a consumer without scale_by is refused, as a link missing its sums). A slot holds
// kGemvMaxLinkRows sums, row r's at r * kNormSumRowStride. Not bit for bit RmsNorm + Gemv, which
// applies the scale before rounding the normed row to bf16: the same up to that rounding.
constexpr double kNormSumScale = 1048576.0;  // 2^20 per unit of h^2
constexpr int kGemvMaxLinkRows = 16;         // the rows of a linked launch, and of a slot
// Row sums 128 bytes apart: every block of a producer adds to each row's sum, and atomics on one
// L2 line queue behind each other, so rows sharing a line would queue m times as long.
constexpr int kNormSumRowStride = 16;
constexpr int kNormSlotSize = kGemvMaxLinkRows * kNormSumRowStride;  // u64 per slot
//
// Pending products (the fused MLP, fused_mlp.h, where its down products are summed across
// blocks in fixed point and nobody forms the residual at its end): `pending` [hidden] holds them
// in kPendingScale units. A consumer that rebuilds its input from them (`rebuild`: m = 1, no
// scale_by, no producer side; the launch's x is not read) forms h = residual + bf16(pending),
// x = bf16(h * weight) and 1 / rms from sum(h^2) over the row, in every block in a fixed order;
// it writes nothing back. The next producer (`pending` set) adds bf16(pending) to the residual
// before its own join, as that residual's first update, and zeroes the pending products it owns.
// Tensor-core kernel only (not the row-streaming one), and one row (m = 1).
constexpr double kPendingScale = 4294967296.0;  // 2^32 per unit of a pending product
constexpr int kGemvMaxRebuildK = 2048;          // the longest rebuilt row
struct GemvPendingRow {
  const float* residual = nullptr;     // [k]
  const float* weight = nullptr;       // [k] the norm's weight
  const long long* pending = nullptr;  // [k]
  constexpr bool on() const { return pending != nullptr; }
};
struct GemvNormLink {
  // Producer.
  float* residual = nullptr;               // [m, n] fp32, updated in place
  const float* weight = nullptr;           // [n] the next norm's weight
  __nv_bfloat16* normed = nullptr;         // [m, n] the consumer's input
  unsigned long long* sum_sq = nullptr;    // fixed-point sums of h^2 (zero before); a slot
  long long* pending = nullptr;            // [n] pending products joined first, then zeroed
  // Consumer.
  const unsigned long long* scale_by = nullptr;  // a slot (kNormSumRowStride apart)
  unsigned long long* zero_after = nullptr;      // a slot
  GemvPendingRow rebuild;                  // instead of x and scale_by
  bool zero_only = false;                  // zero_after alone, on purpose (no scale_by)
  float eps = 0.0f;

  // Any of the producer's buffers is set, and all four are.
  constexpr bool has_producer() const {
    return residual != nullptr || weight != nullptr || normed != nullptr || sum_sq != nullptr;
  }
  constexpr bool producer_complete() const {
    return residual != nullptr && weight != nullptr && normed != nullptr && sum_sq != nullptr;
  }
  // Either side is set (a link without one is refused by GemvSupported).
  constexpr bool any() const {
    return sum_sq != nullptr || scale_by != nullptr || zero_after != nullptr || rebuild.on();
  }
};

// An input row merged from decode attention's key partitions (decode_attention.h
// DecodeAttentionParams::merged_by_consumer) instead of read from x: element h * head_dim + d is
// query head h's output, sum_s 2^(m_s - M) o_s[d] / sum_s 2^(m_s - M) l_s over the partitions s
// holding keys of context_lens[0] keys (M their largest max), rounded to bf16; zeros for an empty
// context. Every block forms the row in shared memory after its wait, so attention needs no
// merge of its own (no counter, no last block, no combine launch). The tensor-core kernel only,
// one row, k = num_heads * head_dim <= kGemvMaxRebuildK, not with a rebuilt row.
struct GemvMergedInput {
  const float* partial_out = nullptr;     // [num_heads, num_splits, head_dim] (row 0's)
  const float* partial_ml = nullptr;      // [num_heads, num_splits, 2] (base-2 max, sum)
  const int32_t* context_lens = nullptr;  // [1] a step array
  int32_t num_splits = 0;                 // >= 2 (with one there are no partials)
  int32_t partition_size = 0;             // the plan's granule (decode_attention.h)
  int32_t num_heads = 0;
  int32_t head_dim = 0;                   // a multiple of 8
  constexpr bool on() const { return partial_out != nullptr; }
};

struct GemvParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major, 16-byte aligned rows
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (HF weight layout)
  void* y = nullptr;                 // [m, n] row-major, bf16 or fp32
  bool y_f32 = false;
  int32_t m = 0;                     // 1..kGemvMaxSlicedRows
  int32_t n = 0;
  int32_t k = 0;                     // multiple of 8
  GemvNormLink link{};               // set: m <= kGemvMaxLinkRows (GemvSupported)
  GemvMergedInput merged{};          // set: x is not read (GemvSupported: m = 1)
};

// Launch shape: `warps` per block (1, 2, 4 or 8) split k; each thread keeps `unroll` (2, 4 or 8)
// 16-byte weight loads in flight. {0, 0} picks the default for the shape.
// `evict_first`: the full groups' weight loads mark their L2 lines evict-first (1), or not (0);
// -1: where the weight is at most GemvEvictFirstMaxBytes(). Results are the same either way.
// `rows`: the row-streaming kernel (gemv_rows.h; m = 1 only) instead of the tensor-core one;
// warps, unroll and evict_first do not apply to it. Its sums are formed in another order than the
// tensor-core kernel's, so where the default picks it a row alone (m = 1) and the same row in a
// batch of 2-16 may differ in the last bits (the tensor-core kernel's rows do not depend on m).
// `slab` (with rows): the same units streamed by the slab kernel (gemv_slab.h), which forms a
// row's sum in its own order again (opt-in: GemvSlabByDefault).
struct GemvTuning {
  int warps = 0;
  int unroll = 0;
  int evict_first = -1;
  bool rows = false;
  bool slab = false;
};

// The largest weight (bytes) whose loads are marked evict-first by default:
// RTGEN_GEMV_EVICT_FIRST_MB (0 = never), default 16 MiB. Measured on the H200 (rtgen-gemv-bench,
// m = 1): SmolLM2-135M's four layer GEMVs 1.5-1.9 us instead of 1.7-2.6; the decode step of
// SmolLM2 b1 -5.6 %, Llama-3.2-1B b1 -1.8 % (its qkv and o), Llama-3-8B unchanged (none of its
// weights is that small). On LM heads (56-1050 MiB) the hint made the GEMV slower.
int64_t GemvEvictFirstMaxBytes();

// The smallest weight (bytes) the default tuning streams by rows at m = 1 (with at least 4096
// output features): RTGEN_GEMV_ROWS_MIN_MB (0 = never), default 24 MiB. Read once per process.
int64_t GemvRowsMinBytes();
// True when the default tuning of `p` is a one-row kernel of large weights
// (GemvDefaultTuning().rows: the row-streaming kernel, or the slab kernel where opted in).
bool GemvStreamsRows(const GemvParams& p);

// True when `p`'s shape and alignment suit the kernel. With a norm link (either side), also that
// m <= kGemvMaxLinkRows (m = 1 with pending products or a rebuilt row), that a producer names all
// four of its buffers and that a consumer's zero_after is a slot it does not read. A producer
// link is taken only by Gemv / GemvTuned (the plain epilogue): GemvSiluMul* and
// GemvRopeKvStore* refuse one (cudaErrorInvalidValue).
bool GemvSupported(const GemvParams& p);
// The tuning Gemv() uses for `p`.
GemvTuning GemvDefaultTuning(const GemvParams& p);
cudaError_t Gemv(GemvParams p, cudaStream_t stream);
// Same with an explicit launch shape (benchmarks and tests); cudaErrorInvalidValue for a tuning
// outside the lists above.
cudaError_t GemvTuned(GemvParams p, GemvTuning tuning, cudaStream_t stream);

// The gate+up projection and the SwiGLU activation in one launch: w is [gate; up] ([n, k] with
// n = 2 * inter), y is act[m, inter] bf16 with act = silu(g) * u, where g and u are the products
// rounded to bf16 (bit for bit Gemv into a bf16 [m, n] buffer, same launch shape, then SiluMul).
// Needs GemvSupported(p), n even and bf16 output.
bool GemvSiluMulSupported(const GemvParams& p);
cudaError_t GemvSiluMul(GemvParams p, cudaStream_t stream);
cudaError_t GemvSiluMulTuned(GemvParams p, GemvTuning tuning, cudaStream_t stream);

// The qkv projection with RoPE and the KV store in its epilogue: w is the fused [q; k; v] weight
// (n = (num_heads + 2 * num_kv_heads) * head_dim), y the bf16 qkv rows [m, n]. Each product is
// rounded to bf16 (what Gemv stores), q and k are rotated (rope_math.cuh, as RopeKvStore does)
// and stored in y, and row r's rotated k and its v are written to cache slot slot_mapping[r]
// (-1: skipped). Bit for bit Gemv with the same launch shape followed by RopeKvStore.
struct GemvRopeParams {
  const int32_t* positions = nullptr;     // [m] absolute positions
  const float* inv_freq = nullptr;        // [head_dim / 2]
  const int32_t* slot_mapping = nullptr;  // [m] cache slots, -1 = skip
  __nv_bfloat16* k_cache = nullptr;       // slot s at s * num_kv_heads * head_dim
  __nv_bfloat16* v_cache = nullptr;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                   // multiple of 8, <= 256
};
bool GemvRopeKvStoreSupported(const GemvParams& p, const GemvRopeParams& r);
cudaError_t GemvRopeKvStore(GemvParams p, GemvRopeParams r, cudaStream_t stream);
cudaError_t GemvRopeKvStoreTuned(GemvParams p, GemvRopeParams r, GemvTuning tuning,
                                 cudaStream_t stream);
// True when GemvRopeKvStore(p, r) with r.head_dim == head_dim lets the next launch (decode
// attention) start before its main loop, not after it: the row-streaming kernel by default
// (RTGEN_ROPE_EARLY_DEPENDENTS=0: after), the tensor-core one at head_dim 64 with a weight of at
// least 8 MiB (RTGEN_TC_ROPE_EARLY_DEPENDENTS=1 / =0: at every shape / none).
bool GemvRopeReleasesEarly(const GemvParams& p, int32_t head_dim);

}  // namespace rtgen::kernels
