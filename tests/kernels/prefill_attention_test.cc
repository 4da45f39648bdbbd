// Causal paged prefill attention, the tensor-core kernel and the CUDA-core one, against an fp64
// reference over the same bf16 cache.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/prefill_attention.h"
#include "kernels/prefill_attention_mma.h"
#include "kernels/step_arrays.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/slow_kv_writer.h"

namespace rtgen::testing_gpu {
namespace {

struct PrefillShape {
  int heads, kv_heads, hd, block_size;
  // Per sequence (context after the step, its tokens in this step): the rest of its keys were
  // cached by earlier chunks.
  std::vector<std::pair<int32_t, int32_t>> seqs;
  // The step's tokens dealt one at a time over the sequences instead of one sequence after
  // another (blocks of many runs: the CUDA-core kernel's, prefill_runs.h).
  bool interleave = false;
  // Each query row 4 times its own position's key: the softmax peaks on the diagonal key (a
  // kernel that drops or misplaces it is far off), wherever in the tiles it falls.
  bool peaked = false;
  // The step's decode rows (one-token sequences at their newest position) marked
  // kPrefillKeepRow, as a mixed step marks them for decode attention: left as they are.
  bool keep_decode_rows = false;
};

// The cache slot of sequence s's key at `pos`; -1 where its block table has no block.
int64_t KeySlot(const Cache& c, int s, int pos) {
  const int32_t block = c.tables[static_cast<size_t>(s) * c.max_blocks + pos / c.block_size];
  return block < 0 ? -1 : int64_t{block} * c.block_size + pos % c.block_size;
}

// Query rows that single out one key (q = 4 k: a score of 4 sqrt(head_dim) against N(0, 4) for the
// rest), on the even heads of every row that is not padding; the odd heads keep their random q,
// so the sums over many keys stay tested. A row whose next position is a 64-key tile edge, a page
// edge or its sequence's end (with the slot past it in the page) baits the causal mask: q is 4
// times the key at pos + 1, which a mask one key too long would let dominate. Every other row
// picks, head by head in turn, one of its keys at 0, 63, 64, 127, 128, its own position, the
// first of its chunk, the last one cached before it, or either side of its page's start: a kernel
// that drops or misplaces that key is off by O(1), where near-uniform attention over a few hundred
// keys hides one key under the row tolerance (a read-only review's simulation: a dropped key in a
// 1000-key row is caught in 16 % of the rows). Returns the count of baited rows.
int PlantKeys(const Cache& c, const PrefillShape& a, const std::vector<int32_t>& token_seq,
              const std::vector<int32_t>& positions, int stride, std::vector<uint16_t>* q) {
  const int group = a.heads / a.kv_heads;
  int baited = 0;
  for (size_t t = 0; t < positions.size(); ++t) {
    const int s = token_seq[t], pos = positions[t];
    if (pos < 0) continue;
    const auto [ctx, q_len] = a.seqs[s];
    const int next = pos + 1;
    const bool bait = (next % 64 == 0 || next % c.block_size == 0 || next == ctx) &&
                      next < c.max_blocks * c.block_size && KeySlot(c, s, next) >= 0;
    baited += bait;
    const int page = pos / c.block_size * c.block_size;
    std::vector<int> picks;
    for (const int j : {0, 63, 64, 127, 128, pos, ctx - q_len, ctx - q_len - 1, page, page - 1}) {
      if (j >= 0 && j <= pos) picks.push_back(j);
    }
    for (int h = 0; h < a.heads; h += 2) {
      const int key = bait ? next : picks[(t + static_cast<size_t>(h) / 2) % picks.size()];
      const int64_t slot = KeySlot(c, s, key);
      const uint16_t* k = c.k.data() + (slot * a.kv_heads + h / group) * a.hd;
      uint16_t* row = q->data() + t * stride + static_cast<size_t>(h) * a.hd;
      for (int i = 0; i < a.hd; ++i) row[i] = ToBf16(4.0f * FromBf16(k[i]));  // exact in bf16
    }
  }
  return baited;
}

// The step's (sequence, position) per token, plus one padding token (position -1) in the middle.
std::vector<std::pair<int32_t, int32_t>> StepTokens(const PrefillShape& a) {
  std::vector<std::vector<std::pair<int32_t, int32_t>>> per_seq(a.seqs.size());
  for (size_t s = 0; s < a.seqs.size(); ++s) {
    for (int32_t p = a.seqs[s].first - a.seqs[s].second; p < a.seqs[s].first; ++p) {
      per_seq[s].push_back({static_cast<int32_t>(s), p});
    }
  }
  std::vector<std::pair<int32_t, int32_t>> tokens;
  if (a.interleave) {
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (const auto& run : per_seq) {
        if (i < run.size()) tokens.push_back(run[i]), any = true;
      }
      if (!any) break;
    }
  } else {
    for (const auto& run : per_seq) tokens.insert(tokens.end(), run.begin(), run.end());
  }
  tokens.insert(tokens.begin() + static_cast<std::ptrdiff_t>(tokens.size() / 2), {0, -1});
  return tokens;
}

// One step's device arrays (q rows q_stride apart; tokens' sequences and positions; the cache
// c's tables; each sequence's context length) as the kernels' parameters, over `heads` query
// heads.
struct DeviceStep {
  const DeviceArray<uint16_t>& q;
  int64_t q_stride;
  const DeviceArray<uint16_t>& k;
  const DeviceArray<uint16_t>& v;
  const DeviceArray<int32_t>& seq;
  const DeviceArray<int32_t>& pos;
  const DeviceArray<int32_t>& tables;
  const DeviceArray<int32_t>& ctx;
  const DeviceArray<uint16_t>& out;
};
kernels::PrefillAttentionParams StepParams(const DeviceStep& d, const Cache& c, int heads,
                                           int tokens, int num_seqs) {
  kernels::PrefillAttentionParams p;
  p.q = d.q.bf16();
  p.q_stride = d.q_stride;
  p.k_cache = d.k.bf16();
  p.v_cache = d.v.bf16();
  p.token_seq = d.seq.get();
  p.positions = d.pos.get();
  p.block_tables = d.tables.get();
  p.context_lens = d.ctx.get();
  p.out = d.out.bf16();
  p.num_tokens = tokens;
  SetCacheShape(c, heads, &p);
  p.num_seqs = num_seqs;
  return p;
}

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillShape> {};

TEST_P(PrefillAttentionTest, BothKernelsMatchReference) {
  const PrefillShape& a = GetParam();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ctx;
  for (auto [n, q] : a.seqs) ctx.push_back(n);
  const Cache c = MakeCache(ctx, a.block_size, a.kv_heads, a.hd, rng);
  std::vector<int32_t> token_seq, positions;
  for (auto [s, p] : StepTokens(a)) {
    token_seq.push_back(s);
    positions.push_back(p);
  }
  // The decode rows a mixed step leaves to decode attention: kept as they are (0xffff, NaN).
  std::vector<bool> kept(positions.size(), false);
  for (size_t t = 0; a.keep_decode_rows && t < positions.size(); ++t) {
    if (positions[t] < 0) continue;
    const auto [ctx, q_len] = a.seqs[token_seq[t]];
    kept[t] = q_len == 1 && positions[t] == ctx - 1;
  }
  const int tokens = static_cast<int>(positions.size()), q_dim = a.heads * a.hd;
  const int stride = q_dim + 2 * a.kv_heads * a.hd;  // q rows inside the qkv projection's rows
  std::vector<uint16_t> q = ToBf16(RandomNormal(size_t{1} * tokens * stride, 1.0f, rng));
  for (int t = 0; a.peaked && t < tokens; ++t) {
    if (positions[t] < 0) continue;
    const int s = token_seq[t], pos = positions[t];
    const size_t slot = size_t{1} * c.tables[s * c.max_blocks + pos / c.block_size] *
                            c.block_size + pos % c.block_size;
    for (int h = 0; h < a.heads; ++h) {
      const size_t key = (slot * a.kv_heads + h / (a.heads / a.kv_heads)) * a.hd;
      for (int i = 0; i < a.hd; ++i) {  // times 4: exact in bf16
        q[size_t{1} * t * stride + h * a.hd + i] = ToBf16(4.0f * FromBf16(c.k[key + i]));
      }
    }
  }
  if (!a.peaked) {
    const int baited = PlantKeys(c, a, token_seq, positions, stride, &q);
    EXPECT_GT(baited, 0) << "no row baits the causal mask";
  }
  // Kept rows' positions as a mixed step writes them (after the planting, which reads them).
  std::vector<int32_t> attention_positions = positions;
  for (size_t t = 0; t < positions.size(); ++t) {
    if (kept[t]) attention_positions[t] = kernels::kPrefillKeepRow;
  }
  DeviceArray<uint16_t> d_q(q), d_k(c.k), d_v(c.v), d_out(size_t{1} * tokens * q_dim);
  DeviceArray<int32_t> d_seq(token_seq), d_pos(attention_positions), d_tables(c.tables),
      d_ctx(ctx);
  kernels::PrefillAttentionParams p =
      StepParams({d_q, stride, d_k, d_v, d_seq, d_pos, d_tables, d_ctx, d_out}, c, a.heads, tokens,
                 static_cast<int>(a.seqs.size()));
  EXPECT_EQ(kernels::PrefillAttentionMmaSupports(p), a.hd == 64 || a.hd == 128);

  std::vector<double> want(size_t{1} * tokens * q_dim, 0.0);
  for (int t = 0; t < tokens; ++t) {
    if (positions[t] < 0 || kept[t]) continue;  // padding: zeros; kept rows: compared below
    Reference(c, token_seq[t], positions[t] + 1, q.data() + size_t{1} * t * stride, a.heads,
              p.scale, want.data() + size_t{1} * t * q_dim);
  }
  const int padding = static_cast<int>(
      std::find(positions.begin(), positions.end(), -1) - positions.begin());  // StepTokens'
  // The tensor-core kernel with one and with two key groups a block (the grid's choice is one of
  // them), then the CUDA-core kernel alone; the output poisoned (NaN) before each.
  for (const int groups : {1, 2, 0}) {
    SCOPED_TRACE(groups > 0 ? "tensor-core kernel, key groups " + std::to_string(groups)
                            : std::string("CUDA-core kernel"));
    p.tensor_cores = groups > 0;
    p.key_groups = groups;
    GPU_CHECK(cudaMemset(d_out.bf16(), 0xff, size_t{1} * tokens * q_dim * sizeof(uint16_t)));
    GPU_CHECK(kernels::PrefillAttention(p, nullptr));
    const std::vector<uint16_t> bits = d_out.ToHost();
    std::vector<float> out = FromBf16(bits);
    for (int t = 0; t < tokens; ++t) {
      if (!kept[t]) continue;
      for (int i = 0; i < q_dim; ++i) {
        ASSERT_EQ(bits[size_t{1} * t * q_dim + i], 0xffff) << "kept row " << t << ", element " << i;
        out[size_t{1} * t * q_dim + i] = 0.0f;  // as `want` holds it, for the sums below
      }
    }
    EXPECT_LE(RelL2(out, want), 1e-2);
    // Row by row too (one (token, head) row: hd elements), so no row's error hides in the sum.
    double worst = 0.0;
    for (size_t row = 0; row * a.hd < out.size(); ++row) {
      const std::span<const float> got(out.data() + row * a.hd, a.hd);
      const std::span<const double> ref(want.data() + row * a.hd, a.hd);
      const size_t t = row / a.heads;
      if (positions[t] >= 0 && !kept[t]) worst = std::max(worst, RelL2(got, ref));
    }
    EXPECT_LE(worst, 3e-2) << "the worst (token, head) row";
    for (int i = 0; i < q_dim; ++i) {
      ASSERT_EQ(out[size_t{1} * padding * q_dim + i], 0.0f) << "padding token, element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillAttentionTest,
    ::testing::Values(
        // Chunks over earlier chunks' keys, a one-token sequence, a short tail.
        PrefillShape{8, 2, 64, 16, {{37, 37}, {300, 45}, {1, 1}, {20, 3}}},
        // SmolLM2-135M's heads: one long prompt (blocks of 64 rows past many key tiles), then a
        // later chunk of 256 tokens over 744 cached keys beside a new sequence.
        PrefillShape{9, 3, 64, 16, {{700, 700}}},
        PrefillShape{9, 3, 64, 16, {{1000, 256}, {40, 40}}},
        // Llama-3.2-1B's and Llama-3-8B's heads (head_dim 64 and 128), 32-key pages.
        PrefillShape{32, 8, 64, 32, {{300, 200}, {5, 1}, {64, 64}}},
        PrefillShape{32, 8, 128, 16, {{330, 130}, {1, 1}, {129, 65}}},
        // A group of 16 query heads per kv head; one kv head per query head.
        PrefillShape{16, 1, 128, 16, {{100, 100}}},
        PrefillShape{4, 4, 64, 16, {{90, 90}, {17, 17}}, true},
        // A mixed step: decode tokens of three sequences first (as the scheduler orders them:
        // a block of four runs, the CUDA-core kernel's), then a chunk; then the same tokens
        // dealt among the chunk's.
        PrefillShape{32, 8, 128, 16, {{20, 1}, {50, 1}, {7, 1}, {300, 80}}},
        PrefillShape{32, 8, 128, 16, {{20, 1}, {50, 1}, {7, 1}, {300, 80}}, true},
        // The same with the decode rows left to decode attention (kPrefillKeepRow).
        PrefillShape{32, 8, 128, 16, {{20, 1}, {50, 1}, {7, 1}, {300, 80}}, false, false, true},
        PrefillShape{32, 8, 128, 16, {{20, 1}, {50, 1}, {7, 1}, {300, 80}}, true, false, true},
        // A block of two runs at head_dim 128 (the tensor-core kernel's): row 128 of a 128-token
        // prompt beside 63 rows of the next sequence's chunk.
        PrefillShape{32, 8, 128, 16, {{128, 128}, {200, 70}}},
        // Peaked softmax: the diagonal key carries each row, early and late in the tiles; pages
        // of 24 keys (not dividing a 64-key tile).
        PrefillShape{9, 3, 64, 24, {{600, 600}, {90, 30}}, false, true},
        PrefillShape{32, 8, 128, 16, {{400, 200}}, false, true},
        // Head dims the tensor-core kernel leaves to the CUDA-core one.
        PrefillShape{4, 2, 32, 8, {{50, 50}}}, PrefillShape{4, 2, 256, 16, {{40, 40}}}));

// PDL order (kernels/launch.h): both kernels read the step's positions, sequences, context
// lengths and block tables before their wait, but its keys and values only after it. The launch
// before writes them late (SlowKvStore: it releases its dependent at once and writes 20 us later)
// and a programmatic dependent after copies the output (PdlCopy), where one kernel returns early
// from every block: (a) 64 one-token sequences, each 64-row block 64 runs, so every tensor-core
// block leaves and the CUDA-core kernel does the work; (b) two 64-token chunks, every block one
// run, so every CUDA-core block leaves. The late keys must be seen and the copy whole. (With the
// early-leaving blocks' waits removed, session 41's H200 still kept the order in three runs: the
// test guards keys read before the wait, which it would catch, more than those waits.)
TEST(PrefillAttentionPdlTest, EarlyReturningBlocksKeepTheOrder) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int heads = 8, kv_heads = 2, hd = 64, block_size = 16;
  const int q_dim = heads * hd, kv_dim = kv_heads * hd;
  std::vector<int32_t> singles(64);
  for (int i = 0; i < 64; ++i) singles[i] = 1 + i * 7 % 50;
  for (const bool chunks : {false, true}) {
    SCOPED_TRACE(chunks ? "two chunks (CUDA-core blocks leave)"
                        : "one-token sequences (tensor-core blocks leave)");
    const std::vector<int32_t> ctx = chunks ? std::vector<int32_t>{100, 64} : singles;
    Cache c = MakeCache(ctx, block_size, kv_heads, hd, rng);
    std::vector<int32_t> token_seq, positions, slots;
    for (size_t s = 0; s < ctx.size(); ++s) {
      const int32_t count = chunks ? 64 : 1;
      for (int32_t pos = ctx[s] - count; pos < ctx[s]; ++pos) {
        token_seq.push_back(static_cast<int32_t>(s));
        positions.push_back(pos);
        slots.push_back(c.tables[s * c.max_blocks + pos / block_size] * block_size +
                        pos % block_size);
      }
    }
    const int tokens = static_cast<int>(positions.size());
    const std::vector<uint16_t> q = ToBf16(RandomNormal(size_t{1} * tokens * q_dim, 1.0f, rng));
    // The step's keys and values, far from the cache's old ones (scale 4).
    const std::vector<uint16_t> nk = ToBf16(RandomNormal(size_t{1} * tokens * kv_dim, 4.0f, rng));
    const std::vector<uint16_t> nv = ToBf16(RandomNormal(size_t{1} * tokens * kv_dim, 4.0f, rng));
    DeviceArray<uint16_t> d_q(q), d_k(c.k), d_v(c.v), d_nk(nk), d_nv(nv);
    DeviceArray<uint16_t> d_out(size_t{1} * tokens * q_dim), d_copy(size_t{1} * tokens * q_dim);
    DeviceArray<int32_t> d_seq(token_seq), d_pos(positions), d_tables(c.tables), d_ctx(ctx);
    DeviceArray<int32_t> d_slots(slots);
    for (int t = 0; t < tokens; ++t) {  // the cache the reference sees: the step's keys stored
      const size_t from = size_t{1} * t * kv_dim, to = size_t{1} * slots[t] * kv_dim;
      std::copy_n(nk.begin() + from, kv_dim, c.k.begin() + to);
      std::copy_n(nv.begin() + from, kv_dim, c.v.begin() + to);
    }
    const kernels::PrefillAttentionParams p =
        StepParams({d_q, q_dim, d_k, d_v, d_seq, d_pos, d_tables, d_ctx, d_out}, c, heads, tokens,
                   static_cast<int>(ctx.size()));
    std::vector<double> want(size_t{1} * tokens * q_dim);
    for (int t = 0; t < tokens; ++t) {
      Reference(c, token_seq[t], positions[t] + 1, q.data() + size_t{1} * t * q_dim, heads,
                p.scale, want.data() + size_t{1} * t * q_dim);
    }
    cudaStream_t stream;
    GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GPU_CHECK(cudaDeviceSynchronize());  // the arrays were filled on the legacy stream
    GPU_CHECK(cudaMemset(d_out.bf16(), 0xff, size_t{1} * tokens * q_dim * sizeof(uint16_t)));
    GPU_CHECK(SlowKvStore({d_nk.bf16(), d_nv.bf16(), kv_dim, d_k.bf16(), d_v.bf16(),
                           d_slots.get(), tokens, kv_dim},
                          20000, stream));
    GPU_CHECK(kernels::PrefillAttention(p, stream));
    GPU_CHECK(PdlCopy(d_out.get(), d_copy.get(), int64_t{tokens} * q_dim, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    GPU_CHECK(cudaStreamDestroy(stream));
    // RelL2 is +inf where the copy saw the poison (NaN) of a row not yet written.
    EXPECT_LE(RelL2(FromBf16(d_copy.ToHost()), want), 1e-2);
  }
}

}  // namespace
}  // namespace rtgen::testing_gpu
