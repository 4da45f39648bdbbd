#include "tests/kernels/gpu_test_util.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "kernels/gemv.h"
#include "kernels/rope_inv_freq.h"

namespace rtgen::testing_gpu {

void CheckCuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, cudaGetErrorString(err));
  std::abort();
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float FromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> ToBf16(std::span<const float> v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16(v[i]);
  return out;
}

std::vector<float> FromBf16(std::span<const uint16_t> v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromBf16(v[i]);
  return out;
}

std::vector<float> RoundBf16(std::vector<float> v) {
  for (float& x : v) x = FromBf16(ToBf16(x));
  return v;
}

std::vector<double> MatmulReference(const std::vector<uint16_t>& x,
                                    const std::vector<uint16_t>& w, int m, int n, int k) {
  const std::vector<float> xf = FromBf16(x), wf = FromBf16(w);
  std::vector<double> out(size_t{1} * m * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const float* xr = &xf[size_t{1} * i * k];
      const float* wr = &wf[size_t{1} * j * k];
      double acc = 0.0;
      for (int kk = 0; kk < k; ++kk) acc += double{xr[kk]} * wr[kk];
      out[size_t{1} * i * n + j] = acc;
    }
  }
  return out;
}

double RelL2(std::span<const float> a, std::span<const double> ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

double RelL2(std::span<const float> a, std::span<const float> ref) {
  std::vector<double> r(ref.begin(), ref.end());
  return RelL2(a, r);
}

std::vector<int> GemvRowCounts() {
  std::vector<int> out;
  for (int m = 1; m <= kernels::kGemvMaxRows; ++m) out.push_back(m);
  for (int m : {17, 24, 32, 41, kernels::kGemvMaxSlicedRows}) out.push_back(m);
  return out;
}

uint64_t FreshSeed() {
  if (const char* v = std::getenv("RTGEN_TEST_SEED"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long seed = std::strtoull(v, &end, 10);
    // Digits only: strtoull would take " 5", "+5", "-5" (as 2^64 - 5) and clamp an overflow.
    if (std::isdigit(static_cast<unsigned char>(v[0])) && *end == '\0' && errno == 0) return seed;
    ADD_FAILURE() << "RTGEN_TEST_SEED='" << v << "' is not a decimal seed; a fresh one is taken";
  }
  return std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
}

std::vector<float> RandomUniform(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> RandomNormal(size_t n, float stddev, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<int32_t> RandomTokens(const ModelConfig& c, int n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = tok(rng);
  return out;
}

ModelConfig TinyConfig() {
  ModelConfig c;
  c.name = "tiny";
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  return c;
}

std::vector<float> TinyRopeInvFreq(int head_dim) {
  ModelConfig c = TinyConfig();
  c.head_dim = head_dim;
  return kernels::RopeInvFreq(c);
}

ModelConfig SmolLm2Config() {
  ModelConfig c;
  c.name = "smollm2-135m-shaped";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 100000.0f;
  c.tie_word_embeddings = true;
  return c;
}

int SmallestRowsK(int n) {
  const int64_t bytes = kernels::GemvRowsMinBytes();
  return static_cast<int>((bytes / (2 * int64_t{n}) + 7) / 8 * 8);
}

ModelConfig AllRowsConfig() {
  ModelConfig c = TinyConfig();
  c.name = "all-rows";
  c.hidden_size = 4096;
  c.intermediate_size = 4096;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.vocab_size = 4096;
  return c;
}

ModelConfig Llama1BLayersConfig() {
  ModelConfig c = AllRowsConfig();  // its 32/8 heads and vocab 4096
  c.name = "llama-3.2-1b-layers";
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.head_dim = 64;
  c.rope_theta = 500000.0f;
  return c;
}

namespace {

// Fast uniform fill (splitmix64) so SmolLM2-sized weights take about a second.
void FillUniform(std::vector<float>& v, size_t n, float center, float half_width, uint64_t& state) {
  v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = (state += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    v[i] = center + (2.0f * u - 1.0f) * half_width;
  }
}

Matrix RandomMatrix(int64_t rows, int64_t cols, uint64_t& state) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  // std 1/sqrt(cols): keeps activations O(1) at any width.
  FillUniform(m.data, rows * cols, 0.0f, std::sqrt(3.0f) / std::sqrt(static_cast<float>(cols)),
              state);
  return m;
}

}  // namespace

ModelWeights RandomWeights(const ModelConfig& c, uint64_t seed) {
  uint64_t state = seed;
  ModelWeights w;
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim;
  w.token_embedding.rows = c.vocab_size;
  w.token_embedding.cols = h;
  FillUniform(w.token_embedding.data, c.vocab_size * h, 0.0f, 1.0f, state);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    FillUniform(l.attn_norm, h, 1.0f, 0.2f, state);
    FillUniform(l.ffn_norm, h, 1.0f, 0.2f, state);
    l.wq = RandomMatrix(q, h, state);
    l.wk = RandomMatrix(kv, h, state);
    l.wv = RandomMatrix(kv, h, state);
    l.wo = RandomMatrix(h, q, state);
    l.w_gate = RandomMatrix(c.intermediate_size, h, state);
    l.w_up = RandomMatrix(c.intermediate_size, h, state);
    l.w_down = RandomMatrix(h, c.intermediate_size, state);
    w.layers.push_back(std::move(l));
  }
  FillUniform(w.final_norm, h, 1.0f, 0.2f, state);
  if (!c.tie_word_embeddings) w.lm_head = RandomMatrix(c.vocab_size, h, state);
  return w;
}

void StepBuilder::Add(TestSeq& seq, int32_t count, const SamplingParams* params) {
  const int32_t s = in_.num_seqs();
  if (in_.query_start.empty()) in_.query_start.push_back(0);
  const int32_t end = seq.computed + count;
  while (static_cast<int32_t>(seq.blocks.size()) * bs_ < end) seq.blocks.push_back((*next_)++);
  for (int32_t p = seq.computed; p < end; ++p) {
    in_.token_ids.push_back(seq.tokens[p]);
    in_.positions.push_back(p);
    in_.slot_mapping.push_back(seq.blocks[p / bs_] * bs_ + p % bs_);
  }
  in_.query_start.push_back(in_.num_tokens());
  in_.context_lens.push_back(end);
  tables_.push_back(seq.blocks);
  if (params) {
    SampleRequest r;
    r.seq_index = s;
    r.params = params;
    r.prompt = std::span<const int32_t>(seq.tokens.data(), seq.tokens.size() - seq.output.size());
    r.output = seq.output;
    r.seed = seq.seed;
    in_.samples.push_back(r);
  }
  seq.computed = end;
}

StepInput StepBuilder::Build(bool decode_only) {
  int32_t width = 0;
  for (const auto& t : tables_) width = std::max<int32_t>(width, static_cast<int32_t>(t.size()));
  in_.max_blocks_per_seq = width;
  in_.block_tables.assign(tables_.size() * width, -1);
  for (size_t s = 0; s < tables_.size(); ++s) {
    std::copy(tables_[s].begin(), tables_[s].end(), in_.block_tables.begin() + s * width);
  }
  in_.is_decode_only = decode_only;
  StepInput out = std::move(in_);
  in_ = StepInput();
  tables_.clear();
  return out;
}

}  // namespace rtgen::testing_gpu
