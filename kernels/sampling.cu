#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/device_utils.cuh"
#include "kernels/env_switch.h"
#include "kernels/kernel_trace.cuh"
#include "kernels/launch.h"
#include "kernels/sample_top.cuh"
#include "kernels/sampling.h"

namespace rtgen::kernels {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Same bits as the host CounterUniform: 24 random mantissa bits, in [0, 1).
__device__ __forceinline__ float DeviceCounterUniform(uint64_t seed, uint64_t counter) {
  const uint64_t x = SplitMix64(SplitMix64(seed) ^ counter);
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
}

// The row's view: scaled logits, their max m, and the candidate set
// {i : key(i) >= key_lo && l[i] >= threshold}. key(i) is TopKeys' key less one,
// ordered(l[i]) << id_bits | (vocab-1-i): larger keys come first in (logit desc, id asc) order
// and keys are unique; 0 is a key here (the lowest), which the searches below rely on.
struct Row {
  const float* l;
  TopKeys keys;
  float m;
  uint64_t key_lo = 0;
  float threshold = -INFINITY;

  __device__ uint64_t Key(int i, float li) const { return keys.Key(i, li) - 1; }
  __device__ bool InSet(int i, float li) const { return Key(i, li) >= key_lo && li >= threshold; }
  __device__ int vocab() const { return keys.vocab; }
};

// Count (mass = false) or probability mass relative to exp(m) (mass = true) of candidates with
// key >= k. Block-wide; every thread gets the result.
__device__ double AtLeast(const Row& r, uint64_t k, bool mass, double* scratch) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < r.vocab(); i += kThreads) {
    const float li = r.l[i];
    if (r.InSet(i, li) && r.Key(i, li) >= k) {
      acc += mass ? static_cast<double>(expf(li - r.m)) : 1.0;
    }
  }
  return BlockSum(acc, scratch);
}

// Largest key k with pred(AtLeast(k)) true, built bit by bit from the top (AtLeast is monotone
// non-increasing in k). Returns 0 when no k > 0 qualifies.
template <typename Pred>
__device__ uint64_t SearchKey(const Row& r, bool mass, double* scratch, Pred pred) {
  uint64_t best = 0;
  for (int b = 32 + r.keys.id_bits - 1; b >= 0; --b) {
    const uint64_t trial = best | (uint64_t{1} << b);
    if (pred(AtLeast(r, trial, mass, scratch))) best = trial;
  }
  return best;
}

__device__ int KeyToId(const Row& r, uint64_t key) { return r.keys.Entry(key + 1, 0.0f).token; }

// Greedy rows in one pass over the logits: the max, its lowest id, and the sum of exp(l - max)
// (rescaled whenever the running max rises), instead of separate max, sum and argmax passes.
// Each thread walks its ids in ascending order, 8 float4 loads in flight: per batch of loads it
// takes the batch's max and lowest argmax first, then sums the batch's exp(l - max) in fp32 (the
// exps independent of each other), and folds that into its running state; threads, warps and
// blocks are then combined by fixed-order shuffle trees (deterministic, and no serial chain of
// loads: the last block of a split row used to read the parts' states one after another, and
// the kernel took ~30 us at any batch on the H200, session 8).
struct GreedyState {  // 16 bytes (kSampleSplitStateBytes)
  float m = -INFINITY;      // running max
  int i = 0x7fffffff;       // lowest id holding it
  double s = 0.0;           // sum of exp(l - m)
};
static_assert(sizeof(GreedyState) == kSampleSplitStateBytes);

__device__ __forceinline__ void GreedyUpdate(GreedyState& g, float x, int i) {
  // -inf or NaN (a NaN logit counts as -inf, as on the CPU): no mass, never the argmax unless
  // every logit is one. +inf counts as the largest finite float.
  x = FiniteLogit(x);
  if (x == -INFINITY) return;
  if (x > g.m) {
    g.s = (g.m == -INFINITY ? 0.0 : g.s * static_cast<double>(expf(g.m - x))) + 1.0;
    g.m = x;
    g.i = i;
  } else {
    g.s += static_cast<double>(expf(x - g.m));
    if (x == g.m && i < g.i) g.i = i;
  }
}

__device__ __forceinline__ GreedyState GreedyCombine(const GreedyState& a, const GreedyState& b) {
  GreedyState r;
  r.m = fmaxf(a.m, b.m);
  if (r.m == -INFINITY) return r;
  r.i = a.m > b.m ? a.i : b.m > a.m ? b.i : min(a.i, b.i);
  r.s = (a.m == -INFINITY ? 0.0 : a.s * static_cast<double>(expf(a.m - r.m))) +
        (b.m == -INFINITY ? 0.0 : b.s * static_cast<double>(expf(b.m - r.m)));
  return r;
}

// The warp's states combined by a butterfly in which the lower lane's state always comes first
// (the same tree on every run); every lane gets the result.
__device__ __forceinline__ GreedyState WarpCombine(GreedyState g) {
  for (int o = 16; o > 0; o >>= 1) {
    GreedyState other;
    other.m = __shfl_xor_sync(kFullMask, g.m, o);
    other.i = __shfl_xor_sync(kFullMask, g.i, o);
    other.s = __shfl_xor_sync(kFullMask, g.s, o);
    g = (threadIdx.x & o) ? GreedyCombine(other, g) : GreedyCombine(g, other);
  }
  return g;
}

// Block-wide over ids [begin, end) of a row: the result in `out`, written by thread 0 for thread 0
// (lowest id 0x7fffffff when every logit is -inf). `vec`: the row is 16-byte aligned and
// begin % 4 == 0, so float4 loads may be used.
__device__ void GreedyPass(const float* l, int begin, int end, bool vec, GreedyState* warp_states,
                           GreedyState* out) {
  constexpr int kBatch = 8;
  GreedyState g;
  const int b4 = begin / 4, e4 = vec ? end / 4 : b4;
  const float4* l4 = reinterpret_cast<const float4*>(l);
  for (int c0 = b4 + threadIdx.x; c0 < e4; c0 += kBatch * kThreads) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = c0 + u * kThreads;
      v[u] = c < e4 ? l4[c] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      // NaN as -inf, +inf as the largest float (FiniteLogit): no NaN in the sum.
      v[u] = make_float4(FiniteLogit(v[u].x), FiniteLogit(v[u].y), FiniteLogit(v[u].z),
                         FiniteLogit(v[u].w));
    }
    GreedyState b;  // this batch: ids ascend with u, then x, y, z, w
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = 4 * (c0 + u * kThreads);
      const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (x[e] > b.m) b.m = x[e], b.i = i + e;  // strictly greater: the lowest id of a tie
      }
    }
    if (b.m == -INFINITY) continue;
    // Only the loads that held ids: a padding load's exps are exp(-inf) = +0, and adding +0 to
    // a sum that starts at +0 leaves its bits, so skipping them changes nothing but the work
    // (at 512 threads a split's ids fill one or two of the eight loads).
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (c0 + u * kThreads >= e4) break;
      sum += (expf(v[u].x - b.m) + expf(v[u].y - b.m)) + (expf(v[u].z - b.m) + expf(v[u].w - b.m));
    }
    b.s = sum;
    g = GreedyCombine(g, b);
  }
  for (int i = max(begin, 4 * e4) + threadIdx.x; i < end; i += kThreads) GreedyUpdate(g, l[i], i);
  RTGEN_TRACE_MARK(0);  // thread 0's ids read and folded into its state
  // The block's max and its lowest id first (float and int shuffles, no exps; exact, so every
  // lane and thread gets the same pair), then each thread's sum rescaled to that max once and the
  // sums added in a fixed order: one exp per thread, where a tree of GreedyCombine took two per
  // level (that tree was ~4 us of the pass on the H200, session 18).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kThreads / 32;
  float m = g.m;
  int id = g.i;
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(kFullMask, m, o);
    const int oi = __shfl_xor_sync(kFullMask, id, o);
    if (om > m || (om == m && oi < id)) m = om, id = oi;
  }
  if (lane == 0) warp_states[warp].m = m, warp_states[warp].i = id;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    const float om = warp_states[w].m;
    const int oi = warp_states[w].i;
    if (om > m || (om == m && oi < id)) m = om, id = oi;
  }
  // exp(-inf - m) would be 0 too, but m is -inf when every logit is: no NaN from -inf - -inf.
  double sum = g.m == -INFINITY ? 0.0 : g.s * static_cast<double>(expf(g.m - m));
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFullMask, sum, o);
  if (lane == 0) warp_states[warp].s = sum;  // .m and .i are read above, .s not
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_states[w].s;
    GreedyState r;
    if (m != -INFINITY) r.m = m, r.i = id, r.s = total;
    *out = r;
  }
}

// One penalized logit (SampleRowParams): the CPU sampler's operations
// (engine/sampling/sampler.cc ApplyPenalties) with the same roundings and no contraction, so it
// is the CPU's bit for bit. `count` is the token's number of output occurrences.
__device__ __forceinline__ float Penalized(float x, const SampleRowParams& rp, int32_t count) {
  if (rp.repetition_penalty != 1.0f) {
    x = x > 0.0f ? __fdiv_rn(x, rp.repetition_penalty) : __fmul_rn(x, rp.repetition_penalty);
  }
  if (count > 0 && (rp.presence_penalty != 0.0f || rp.frequency_penalty != 0.0f)) {
    x = __fsub_rn(x, __fmaf_rn(rp.frequency_penalty, static_cast<float>(count),
                               rp.presence_penalty));
  }
  return x;
}

// Block-wide (every thread calls it; the row's parameters are the block's): applies the row's
// penalties, in place, to the logits of the ids [lo, hi) the block owns. The pending output
// token (penalty_pending) adds one occurrence to its entry, or is a token of its own with one
// occurrence when no entry has it.
// Ends with a barrier, so the block's later reads of the logits see every change.
__device__ void ApplyPenalties(const SampleTokensParams& p, const SampleRowParams& rp, float* l,
                               int lo, int hi) {
  if (rp.penalty_count <= 0 && rp.penalty_pending < 0) return;
  __shared__ int s_pending_listed;
  const int32_t pending = rp.penalty_pending >= 0 ? p.resolved_token_ids[rp.penalty_pending] : -1;
  if (threadIdx.x == 0) s_pending_listed = 0;
  __syncthreads();
  const SamplePenaltyEntry* entries = p.penalty_entries + rp.penalty_begin;
  for (int j = threadIdx.x; j < rp.penalty_count; j += blockDim.x) {
    const SamplePenaltyEntry e = entries[j];
    const bool is_pending = e.token == pending;
    if (is_pending) s_pending_listed = 1;
    if (e.token >= lo && e.token < hi) {
      l[e.token] = Penalized(l[e.token], rp, e.output_count + (is_pending ? 1 : 0));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && !s_pending_listed && pending >= lo && pending < hi) {
    l[pending] = Penalized(l[pending], rp, 1);
  }
  __syncthreads();
}

// Block-wide: the top-n entries of a row reduced by this block alone (logprob x - lse).
__device__ void WriteTop(const float* l, int vocab, int n, float lse, bool vec,
                         SampleTopEntry* top, TopScratch& scratch) {
  const TopKeys keys(vocab);
  BlockTopKeys<kThreads>(l, 0, vocab, min(n, vocab), keys, vec, scratch,
                         [&](int r, uint64_t k) { top[r] = keys.Entry(k, lse); });
}

// Writes a greedy row's token (id 0 when every logit is -inf, as ArgMax) and its logprob. The
// chosen logit is the state's max itself (the value of l[r.i]; a tie of +0 and -0 may keep the
// other zero, which gives the same logprob bits), so only an all -inf row reads the logits again.
__device__ void WriteGreedy(const SampleTokensParams& p, int row, const float* l, GreedyState r) {
  const bool found = r.i != 0x7fffffff;
  if (!found) r.i = 0;
  p.token_ids[row] = r.i;
  if (p.chain_token_ids != nullptr) p.chain_token_ids[row] = r.i;
  p.logprobs[row] = (found ? r.m : l[0]) - (r.m + static_cast<float>(log(r.s)));
}

// A greedy row split over p.splits blocks (blockIdx.y = part): each block reduces its chunk of
// ids to a GreedyState in p.split_states (and, when the row asks for its top-n, to its chunk's
// top-n keys in p.split_top); in the last block of the row to finish, warp 0 reads the parts'
// states at once and combines them by the fixed tree (so the result does not depend on which
// block finishes last), writes the token (and merges the top-n lists) and resets the row's
// counter for the next launch.
// top_n: the row's top-n count (1..kMaxTopLogprobs; read only when top is given).
__device__ void GreedySplit(const SampleTokensParams& p, const SampleRowParams& rp, int row,
                            float* l, GreedyState* warp_states, GreedyState* result,
                            SampleTopEntry* top, int top_n, TopScratch* top_scratch) {
  static_assert(kMaxSampleSplits <= 32);
  const int part = blockIdx.y;
  const int per = ((p.vocab + p.splits - 1) / p.splits + 3) / 4 * 4;
  const int begin = min(p.vocab, part * per), end = min(p.vocab, begin + per);
  const bool vec = p.row_stride % 4 == 0;
  ApplyPenalties(p, rp, l, begin, end);
  GreedyPass(l, begin, end, vec, warp_states, result);
  RTGEN_TRACE_MARK(1);  // the block's ids reduced to one state
  const int n = min(top_n, p.vocab);
  uint64_t* lists =
      top != nullptr ? p.split_top + int64_t{row} * p.splits * kMaxTopLogprobs : nullptr;
  if (top != nullptr) {
    uint64_t* list = lists + part * kMaxTopLogprobs;
    BlockTopKeys<kThreads>(l, begin, end, n, TopKeys(p.vocab), vec, *top_scratch,
                           [list](int r, uint64_t k) { list[r] = k; });
    for (int j = min(n, end - begin) + threadIdx.x; j < n; j += kThreads) list[j] = 0;
    __threadfence();  // the list is visible before lane 0 counts the arrival
    __syncthreads();
  }
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  GreedyState* states = static_cast<GreedyState*>(p.split_states) + int64_t{row} * p.splits;
  int last = 0;
  if (lane == 0) {
    states[part] = *result;
    __threadfence();  // the state is visible before the arrival is counted
    last = atomicAdd(&p.split_counters[row], 1) == p.splits - 1;
    if (last) {
      p.split_counters[row] = 0;
      __threadfence();
    }
  }
  if (!__shfl_sync(kFullMask, last, 0)) return;
  __syncwarp();  // orders the other lanes' loads after lane 0's acquire (shfl orders no memory)
  GreedyState o;
  if (lane < p.splits) {
    o.m = __ldcg(&states[lane].m);
    o.i = __ldcg(&states[lane].i);
    o.s = __ldcg(&states[lane].s);
  }
  o = WarpCombine(o);
  if (lane == 0) WriteGreedy(p, row, l, o);
  if (top != nullptr) {
    MergeTopLists(lists, p.splits, n, TopKeys(p.vocab), o.m + static_cast<float>(log(o.s)), top,
                  *top_scratch);
  }
}

// Draw in id order over the candidate set: the first id whose inclusive cumulative mass exceeds
// u * total, falling back to the last candidate with positive mass.
__device__ int DrawIdOrder(const Row& r, float u, double* scratch, int* iscratch) {
  const int vocab = r.vocab();
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int lo = min(vocab, static_cast<int>(threadIdx.x) * chunk);
  const int hi = min(vocab, lo + chunk);
  double local = 0.0;
  int last_positive = -1;
  for (int i = lo; i < hi; ++i) {
    const float li = r.l[i];
    if (!r.InSet(i, li)) continue;
    const double p = expf(li - r.m);
    if (p > 0.0) local += p, last_positive = i;
  }
  // Exclusive scan of the per-thread sums (thread order = id order).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double incl = local;
  for (int o = 1; o < 32; o <<= 1) {
    const double v = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += v;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = incl;
  if (threadIdx.x == 0) iscratch[0] = 0x7fffffff, iscratch[1] = -1;
  __syncthreads();
  double warp_offset = 0.0, total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) warp_offset += scratch[w];
    total += scratch[w];
  }
  const double excl = warp_offset + incl - local;
  const double target = static_cast<double>(u) * total;
  if (last_positive >= 0 && excl + local > target) atomicMin(&iscratch[0], static_cast<int>(threadIdx.x));
  atomicMax(&iscratch[1], last_positive);
  __syncthreads();
  int result = iscratch[1] < 0 ? 0 : iscratch[1];
  if (iscratch[0] != 0x7fffffff) {
    // The crossing thread walks its chunk; everyone else waits for its answer.
    __syncthreads();
    if (static_cast<int>(threadIdx.x) == iscratch[0]) {
      double cum = excl;
      int pick = last_positive;
      for (int i = lo; i < hi; ++i) {
        const float li = r.l[i];
        if (!r.InSet(i, li)) continue;
        const double p = expf(li - r.m);
        if (p <= 0.0) continue;
        cum += p;
        if (cum > target) {
          pick = i;
          break;
        }
      }
      iscratch[2] = pick;
    }
    __syncthreads();
    result = iscratch[2];
  }
  __syncthreads();
  return result;
}

// A non-greedy row's token: the candidate set of top-k, top-p and min-p over the scaled logits
// l (max m), then a draw with the row's counter-based uniform. Block-wide.
__device__ int DrawToken(const float* l, int vocab, float m, const SampleRowParams& rp,
                         double* dscratch, int* iscratch) {
  Row r{l, TopKeys(vocab), m};
  const float u = DeviceCounterUniform(rp.seed, rp.counter);
  const bool use_top_k = rp.top_k > 0 && rp.top_k < vocab;
  const bool use_top_p = rp.top_p < 1.0f;
  if (use_top_k) {
    const double k = rp.top_k;
    r.key_lo = SearchKey(r, false, dscratch, [k](double count) { return count >= k; });
  }
  if (use_top_p) {
    const double target = static_cast<double>(rp.top_p) * AtLeast(r, 0, true, dscratch);
    const uint64_t k = SearchKey(r, true, dscratch, [target](double mass) { return mass >= target; });
    if (k > r.key_lo) r.key_lo = k;
  }
  // p >= min_p * p_max  <=>  logit >= max_logit + log(min_p).
  if (rp.min_p > 0.0f) r.threshold = m + logf(rp.min_p);
  if (!use_top_k && !use_top_p) return DrawIdOrder(r, u, dscratch, iscratch);
  const double target = static_cast<double>(u) * AtLeast(r, 0, true, dscratch);
  const uint64_t k = SearchKey(r, true, dscratch, [target](double mass) { return mass > target; });
  if (k != 0 && AtLeast(r, k, true, dscratch) > target) return KeyToId(r, k);
  // Rounding left the target at the total: the last candidate with positive mass.
  const double target_all = AtLeast(r, 0, true, dscratch);
  return KeyToId(r, SearchKey(r, true, dscratch,
                              [target_all](double mass) { return mass >= target_all; }));
}

__global__ void __launch_bounds__(kThreads) SampleKernel(SampleTokensParams p) {
  RTGEN_TRACE_KERNEL(kSample);
  __shared__ double dscratch[32];
  __shared__ float fscratch[32];
  __shared__ int iscratch[32];
  const int row = blockIdx.x;
  // A step array (written by no kernel): read before the wait, so the logits loads that depend
  // on its greedy test are not a round trip later.
  const SampleRowParams rp = p.rows[row];
  PdlWait();
  PdlLaunchDependents();
  float* l = p.logits + row * p.row_stride;
  const bool vec = p.row_stride % 4 == 0;
  const bool greedy = rp.temperature == 0.0f;
  __shared__ TopScratch top_scratch;
  // At most kMaxTopLogprobs entries, the room a row has in p.top (the backend never asks more:
  // SamplingParams' limit).
  const int top_n = min(rp.top_logprobs, kMaxTopLogprobs);
  SampleTopEntry* top = top_n > 0 ? p.top + int64_t{row} * kMaxTopLogprobs : nullptr;
  if (greedy) {
    __shared__ GreedyState warp_states[kThreads / 32];
    __shared__ GreedyState result;
    if (p.splits > 1) {
      GreedySplit(p, rp, row, l, warp_states, &result, top, top_n, &top_scratch);
      return;
    }
    ApplyPenalties(p, rp, l, 0, p.vocab);
    GreedyPass(l, 0, p.vocab, vec, warp_states, &result);
    if (threadIdx.x == 0) WriteGreedy(p, row, l, result);
    if (top != nullptr) {
      __syncthreads();  // `result`, written by thread 0
      WriteTop(l, p.vocab, top_n, result.m + static_cast<float>(log(result.s)), vec, top,
               top_scratch);
    }
    return;
  }
  if (blockIdx.y > 0) return;  // a sampled row is drawn by one block
  ApplyPenalties(p, rp, l, 0, p.vocab);
  // Scaled as the CPU sampler scales (engine/sampling/sampler.cc SampleToken: times the
  // rounded inverse, not divided), so both see the same logits bit for bit: the same top-n
  // order on near-ties. Explicit roundings: no contraction into a later operation.
  // A NaN logit becomes -inf here and +inf (one scaled past the float range too) the largest
  // float, as the CPU maps them (FiniteLogit), so the keys, sums and draw below see no NaN.
  const float inv_t = __fdiv_rn(1.0f, rp.temperature);
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    l[i] = FiniteLogit(__fmul_rn(l[i], inv_t));
  }
  __syncthreads();  // also makes the global writes visible to the block
  float m = -INFINITY;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) m = fmaxf(m, l[i]);
  m = BlockMax(m, fscratch);
  double sum = 0.0;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) sum += expf(l[i] - m);
  sum = BlockSum(sum, dscratch);
  const float lse = m + static_cast<float>(log(sum));

  // Every logit -inf (or NaN): no mass to draw from, id 0 as the CPU gives (m is the block's).
  const int token = m == -INFINITY ? 0 : DrawToken(l, p.vocab, m, rp, dscratch, iscratch);
  if (threadIdx.x == 0) {
    p.token_ids[row] = token;
    if (p.chain_token_ids != nullptr) p.chain_token_ids[row] = token;
    p.logprobs[row] = l[token] - lse;
  }
  if (top != nullptr) WriteTop(l, p.vocab, top_n, lse, vec, top, top_scratch);
}

__global__ void CounterUniformKernel(const uint64_t* seeds, const uint64_t* counters, float* out,
                                     int32_t n) {
  PdlWait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = DeviceCounterUniform(seeds[i], counters[i]);
}

}  // namespace

cudaError_t SampleTokens(SampleTokensParams p, cudaStream_t stream) {
  if (p.num_rows <= 0) return cudaSuccess;
  if (p.vocab <= 0 || p.row_stride < p.vocab || p.splits < 1 || p.splits > kMaxSampleSplits ||
      (p.splits > 1 && (p.split_states == nullptr || p.split_counters == nullptr)) ||
      (p.splits > 1 && p.top != nullptr && p.split_top == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return LaunchKernel(SampleKernel, dim3(p.num_rows, p.splits), kThreads, 0, stream, p);
}

int32_t PlanSampleSplits(int32_t num_rows, int32_t vocab, int32_t num_sms) {
  // About one block per SM (RTGEN_SAMPLE_BLOCKS_PER_SM, 1..4, for A/B), each over at least
  // kMinIds ids. Two per SM took the sampler of the 8B shape's batch 64 (64 rows of 128 256
  // logits) from ~21 to ~17.6 us in a kernel trace on the H200, but the step's TPOT did not
  // follow in two A/Bs (session 18: not the default).
  constexpr int32_t kMinIds = 1024;
  static const int32_t per_sm = [] {
    return static_cast<int32_t>(EnvIntIn("RTGEN_SAMPLE_BLOCKS_PER_SM", 1, 4, 1));
  }();
  if (num_rows <= 0) return 1;
  const int32_t want = std::min(per_sm * num_sms / num_rows, vocab / kMinIds);
  return std::clamp(want, 1, kMaxSampleSplits);
}

cudaError_t CounterUniformBatch(const uint64_t* seeds, const uint64_t* counters, float* out,
                                int32_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return LaunchKernel(CounterUniformKernel, (n + 255) / 256, 256, 0, stream, seeds, counters, out,
                      n);
}

}  // namespace rtgen::kernels
