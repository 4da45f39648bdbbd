// Step buffers: every (tokens, seqs) layout fits the allocation without overlapping arrays,
// Upload carries every input array to the device (narrow tables in one copy, wide tables with
// only the asked columns), and Download brings back exactly the outputs. Staged copies in a
// graph (StageIn, StageOut) carry the same bytes from and into the host slot each instantiation
// was retargeted to.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/step_buffers.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {
namespace {

struct Span {
  const char* begin;
  size_t bytes;
};

std::vector<Span> Inputs(const StepArrays& a, int32_t tokens, int32_t seqs, int32_t width) {
  auto span = [](const void* p, size_t n) { return Span{static_cast<const char*>(p), n}; };
  const size_t t = tokens * sizeof(int32_t), s = seqs * sizeof(int32_t);
  return {span(a.token_ids, t),    span(a.positions, t),    span(a.slot_mapping, t),
          span(a.token_seq, t),    span(a.attention_positions, t),
          span(a.context_lens, s), span(a.decode_context_lens, s), span(a.sample_rows, s),
          span(a.sample_params, seqs * sizeof(kernels::SampleRowParams)),
          span(a.block_tables, s * width)};
}

// Fills `bytes` at p with random bytes.
void Scribble(char* p, size_t bytes, std::mt19937_64& rng) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(rng());
}

TEST(StepBuffersTest, LayoutsUploadAndDownload) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const StepCapacity cap{8192, 256, 512};
  auto made = StepBuffers::Create(cap);
  ASSERT_TRUE(made.ok()) << made.status();
  const StepBuffers& b = *made;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // (tokens, seqs, block columns): graph buckets, a prefill chunk, narrow and wide tables.
  const int32_t shapes[][3] = {{1, 1, 3},     {1, 1, 512},   {8, 8, 17},   {8, 8, 512},
                               {64, 64, 5},   {64, 64, 512}, {256, 256, 40}, {8192, 1, 512},
                               {300, 7, 100}, {8192, 256, 512}};
  const StepArrays whole = b.host(cap.max_tokens, cap.max_seqs);
  const char* end =
      reinterpret_cast<const char*>(whole.out_top + cap.max_seqs * kernels::kMaxTopLogprobs);
  for (const auto& [tokens, seqs, cols] : shapes) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens, " << seqs << " seqs, " << cols
                                    << " columns");
    const StepArrays h = b.host(tokens, seqs), d = b.device(tokens, seqs);
    // Arrays in order, disjoint, inside the allocation; the outputs adjacent.
    const std::vector<Span> in = Inputs(h, tokens, seqs, cap.max_blocks_per_seq);
    for (size_t i = 0; i + 1 < in.size(); ++i) {
      EXPECT_LE(in[i].begin + in[i].bytes, in[i + 1].begin) << "array " << i;
    }
    const char* out = reinterpret_cast<const char*>(h.out_tokens);
    EXPECT_LE(in.back().begin + in.back().bytes, out);
    EXPECT_EQ(reinterpret_cast<const char*>(h.out_logprobs), out + seqs * sizeof(int32_t));
    EXPECT_EQ(reinterpret_cast<const char*>(h.out_top), out + 2 * seqs * sizeof(int32_t));
    EXPECT_LE(reinterpret_cast<const char*>(h.out_top + seqs * kernels::kMaxTopLogprobs), end);
    EXPECT_EQ(h.token_ids, whole.token_ids);  // every layout starts at the allocation

    // Upload: every input array, and the first `cols` columns of every table row.
    const std::vector<Span> din = Inputs(d, tokens, seqs, cap.max_blocks_per_seq);
    for (const Span& s : in) Scribble(const_cast<char*>(s.begin), s.bytes, rng);
    for (const Span& s : din) {
      ASSERT_EQ(cudaMemset(const_cast<char*>(s.begin), 0x7f, s.bytes), cudaSuccess);
    }
    ASSERT_TRUE(b.Upload(tokens, seqs, cols, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<char> got(din[i].bytes);
      ASSERT_EQ(cudaMemcpy(got.data(), din[i].begin, got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      if (i + 1 < in.size()) {
        EXPECT_EQ(std::memcmp(got.data(), in[i].begin, got.size()), 0) << "array " << i;
        continue;
      }
      const size_t row = cap.max_blocks_per_seq * sizeof(int32_t), used = cols * sizeof(int32_t);
      for (int32_t r = 0; r < seqs; ++r) {
        ASSERT_EQ(std::memcmp(got.data() + r * row, in[i].begin + r * row, used), 0)
            << "block table row " << r;
      }
    }

    // Download: the outputs written on the device come back, nothing else changes; the top-n
    // entries only when asked for.
    std::vector<int32_t> tok(seqs);
    std::vector<float> lp(seqs);
    std::vector<kernels::SampleTopEntry> top(size_t{1} * seqs * kernels::kMaxTopLogprobs);
    for (int32_t i = 0; i < seqs; ++i) {
      tok[i] = static_cast<int32_t>(rng() % 50000);
      lp[i] = -0.001f * static_cast<float>(rng() % 9000);
    }
    for (kernels::SampleTopEntry& e : top) e = {static_cast<int32_t>(rng() % 50000), -1.5f};
    ASSERT_EQ(cudaMemcpy(d.out_tokens, tok.data(), seqs * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d.out_logprobs, lp.data(), seqs * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    const size_t top_bytes = top.size() * sizeof(kernels::SampleTopEntry);
    ASSERT_EQ(cudaMemcpy(d.out_top, top.data(), top_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    std::fill(h.out_top, h.out_top + top.size(), kernels::SampleTopEntry{-3, 7.0f});
    const std::vector<char> untouched(reinterpret_cast<const char*>(h.out_top),
                                      reinterpret_cast<const char*>(h.out_top) + top_bytes);
    const std::vector<char> before(in[0].begin, in.back().begin + in.back().bytes);
    ASSERT_TRUE(b.Download(tokens, seqs, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(std::vector<int32_t>(h.out_tokens, h.out_tokens + seqs), tok);
    EXPECT_EQ(std::vector<float>(h.out_logprobs, h.out_logprobs + seqs), lp);
    EXPECT_EQ(std::memcmp(before.data(), in[0].begin, before.size()), 0);
    EXPECT_EQ(std::memcmp(untouched.data(), h.out_top, top_bytes), 0);
    ASSERT_TRUE(b.Download(tokens, seqs, stream, 0, /*top=*/true).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(std::memcmp(top.data(), h.out_top, top_bytes), 0);
    EXPECT_EQ(std::vector<int32_t>(h.out_tokens, h.out_tokens + seqs), tok);
  }
  cudaStreamDestroy(stream);
}

// A graph of one staged step's copies, instantiated for both host slots, moves each slot's own
// inputs in and the device's outputs into that slot only.
TEST(StepBuffersTest, StagedCopiesInAGraphFollowTheirSlot) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const StepCapacity cap{64, 16, 64};
  auto made = StepBuffers::Create(cap);
  ASSERT_TRUE(made.ok()) << made.status();
  const StepBuffers& b = *made;
  EXPECT_TRUE(b.Stages(16));  // 16 rows of 64 columns: 4 KiB of tables
  auto wide = StepBuffers::Create({512, 256, 512});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_TRUE(wide->Stages(8));     // 16 KiB of tables
  EXPECT_FALSE(wide->Stages(9));    // 18 KiB: copied by columns instead
  auto narrow = StepBuffers::Create({512, 256, 4});
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_TRUE(narrow->Stages(StepBuffers::kMostStagedSeqs));
  EXPECT_FALSE(narrow->Stages(StepBuffers::kMostStagedSeqs + 1));  // more rows: copies
  const int32_t n = 5;  // tokens and sequences
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status in = b.StageIn(n, n, stream, 0);
  const absl::Status out = b.StageOut(n, n, stream, 0);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(in.ok()) << in;
  ASSERT_TRUE(out.ok()) << out;
  cudaGraphExec_t exec[2] = {nullptr, nullptr};
  ASSERT_EQ(cudaGraphInstantiate(&exec[0], graph, 0), cudaSuccess);
  int32_t found = 0;
  ASSERT_TRUE(b.RetargetGraphCopies(graph, 1, &found).ok());
  EXPECT_EQ(found, 2);
  ASSERT_EQ(cudaGraphInstantiate(&exec[1], graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);

  const StepArrays d = b.device(n, n);
  const std::vector<Span> din = Inputs(d, n, n, cap.max_blocks_per_seq);
  const size_t in_bytes = din.back().begin + din.back().bytes - din[0].begin;
  const StepArrays h0 = b.host(n, n, 0), h1 = b.host(n, n, 1);
  const char* out_begin = reinterpret_cast<const char*>(h0.out_tokens);
  const size_t out_bytes =
      reinterpret_cast<const char*>(h0.out_top + n * kernels::kMaxTopLogprobs) - out_begin;
  const size_t out_at = out_begin - reinterpret_cast<const char*>(h0.token_ids);
  for (const int slot : {1, 0, 1}) {
    SCOPED_TRACE(testing::Message() << "slot " << slot);
    const StepArrays& h = slot == 0 ? h0 : h1;
    const StepArrays& other = slot == 0 ? h1 : h0;
    char* inputs = reinterpret_cast<char*>(h.token_ids);
    Scribble(reinterpret_cast<char*>(h0.token_ids), in_bytes, rng);
    Scribble(reinterpret_cast<char*>(h1.token_ids), in_bytes, rng);
    Scribble(reinterpret_cast<char*>(h0.token_ids) + out_at, out_bytes, rng);
    Scribble(reinterpret_cast<char*>(h1.token_ids) + out_at, out_bytes, rng);
    const std::vector<char> other_out(reinterpret_cast<const char*>(other.token_ids) + out_at,
                                      reinterpret_cast<const char*>(other.token_ids) + out_at +
                                          out_bytes);
    std::vector<char> device_out(out_bytes);
    Scribble(device_out.data(), out_bytes, rng);
    ASSERT_EQ(cudaMemcpy(d.out_tokens, device_out.data(), out_bytes, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec[slot], stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<char> got(in_bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), din[0].begin, in_bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(got.data(), inputs, in_bytes), 0) << "inputs from the slot";
    EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(h.token_ids) + out_at,
                          device_out.data(), out_bytes),
              0)
        << "outputs into the slot";
    EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(other.token_ids) + out_at,
                          other_out.data(), out_bytes),
              0)
        << "the other slot's outputs untouched";
  }
  cudaGraphExecDestroy(exec[0]);
  cudaGraphExecDestroy(exec[1]);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace rtgen::testing_gpu
