#pragma once
// Test helpers for the CPU backend: a tiny random Llama, a naive reference forward pass
// (contiguous KV, double accumulation) and StepInput builders.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace rtgen::testing {

inline ModelConfig TinyConfig() {
  ModelConfig c;
  c.name = "tiny";
  c.vocab_size = 300;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = true;
  return c;
}

inline Matrix RandomMatrix(int64_t rows, int64_t cols, std::mt19937& rng, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  Matrix m{rows, cols, std::vector<float>(rows * cols), {}};
  for (float& v : m.data) v = n(rng);
  return m;
}

inline std::vector<float> RandomNorm(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.8f, 1.2f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline ModelWeights TinyWeights(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim, f = c.intermediate_size;
  ModelWeights w;
  w.token_embedding = RandomMatrix(c.vocab_size, h, rng, 1.0f);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    l.attn_norm = RandomNorm(h, rng);
    l.wq = RandomMatrix(q, h, rng, 0.15f);
    l.wk = RandomMatrix(kv, h, rng, 0.15f);
    l.wv = RandomMatrix(kv, h, rng, 0.15f);
    l.wo = RandomMatrix(h, q, rng, 0.1f);
    l.ffn_norm = RandomNorm(h, rng);
    l.w_gate = RandomMatrix(f, h, rng, 0.15f);
    l.w_up = RandomMatrix(f, h, rng, 0.15f);
    l.w_down = RandomMatrix(h, f, rng, 0.1f);
    w.layers.push_back(std::move(l));
  }
  w.final_norm = RandomNorm(h, rng);
  if (!c.tie_word_embeddings) w.lm_head = RandomMatrix(c.vocab_size, h, rng, 0.2f);
  return w;
}

// Rounds every matrix to bf16 (nearest, ties to even), as the bf16 backend stores them.
inline float RoundBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &b, 4);
  return f;
}
inline ModelWeights RoundedToBf16(ModelWeights w) {
  auto round = [](Matrix& m) {
    for (float& v : m.data) v = RoundBf16(v);
  };
  round(w.token_embedding);
  round(w.lm_head);
  for (LayerWeights& l : w.layers) {
    for (Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) round(*m);
  }
  return w;
}

// Naive forward of one sequence; returns the logits after the last token. inv_freq is
// theta^(-2i/head_dim) (no rope scaling).
inline std::vector<double> ReferenceLogits(const ModelConfig& c, const ModelWeights& w,
                                           const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  const int h = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int f = c.intermediate_size;
  auto matvec = [](const Matrix& m, const std::vector<double>& x) {
    std::vector<double> y(m.rows, 0.0);
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t k = 0; k < m.cols; ++k) y[r] += double(m.data[r * m.cols + k]) * x[k];
    }
    return y;
  };
  auto norm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + c.rms_norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * g[i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int pos) {
    for (int hh = 0; hh < heads; ++hh) {
      for (int i = 0; i < hd / 2; ++i) {
        const double freq = std::pow(double(c.rope_theta), -2.0 * i / hd);
        const double cs = std::cos(pos * freq), sn = std::sin(pos * freq);
        double& a = v[hh * hd + i];
        double& b = v[hh * hd + i + hd / 2];
        const double a0 = a, b0 = b;
        a = a0 * cs - b0 * sn;
        b = b0 * cs + a0 * sn;
      }
    }
  };
  std::vector<std::vector<double>> x(n, std::vector<double>(h));
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < h; ++i) x[t][i] = w.token_embedding.data[int64_t(tokens[t]) * h + i];
  }
  for (const LayerWeights& l : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      std::vector<double> hn = norm(x[t], l.attn_norm);
      q[t] = matvec(l.wq, hn);
      k[t] = matvec(l.wk, hn);
      v[t] = matvec(l.wv, hn);
      rope(q[t], nh, t);
      rope(k[t], nkv, t);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<double> attn(nh * hd, 0.0);
      for (int hh = 0; hh < nh; ++hh) {
        const int kvh = hh / (nh / nkv);
        std::vector<double> s(t + 1);
        double m = -1e300;
        for (int p = 0; p <= t; ++p) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][hh * hd + i] * k[p][kvh * hd + i];
          s[p] = d / std::sqrt(double(hd));
          m = std::max(m, s[p]);
        }
        double z = 0;
        for (int p = 0; p <= t; ++p) z += s[p] = std::exp(s[p] - m);
        for (int p = 0; p <= t; ++p) {
          for (int i = 0; i < hd; ++i) attn[hh * hd + i] += s[p] / z * v[p][kvh * hd + i];
        }
      }
      std::vector<double> o = matvec(l.wo, attn);
      for (int i = 0; i < h; ++i) x[t][i] += o[i];
      std::vector<double> hn = norm(x[t], l.ffn_norm);
      std::vector<double> g = matvec(l.w_gate, hn), u = matvec(l.w_up, hn);
      std::vector<double> a(f);
      for (int i = 0; i < f; ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      std::vector<double> d = matvec(l.w_down, a);
      for (int i = 0; i < h; ++i) x[t][i] += d[i];
    }
  }
  return matvec(w.output_matrix(), norm(x[n - 1], w.final_norm));
}

// One sequence's part of a step: `tokens` at positions [start, start + size), KV blocks `blocks`.
struct SeqChunk {
  std::vector<int32_t> tokens;
  int32_t start = 0;
  std::vector<int32_t> blocks;
  bool sample = true;
};

inline StepInput MakeStep(const std::vector<SeqChunk>& seqs, int32_t block_size,
                          const SamplingParams* params) {
  StepInput in;
  in.query_start.push_back(0);
  for (const SeqChunk& s : seqs) {
    in.max_blocks_per_seq =
        std::max<int32_t>(in.max_blocks_per_seq, static_cast<int32_t>(s.blocks.size()));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqChunk& s = seqs[i];
    for (size_t j = 0; j < s.tokens.size(); ++j) {
      const int32_t pos = s.start + static_cast<int32_t>(j);
      in.token_ids.push_back(s.tokens[j]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(s.blocks[pos / block_size] * block_size + pos % block_size);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.context_lens.push_back(s.start + static_cast<int32_t>(s.tokens.size()));
    for (int32_t b = 0; b < in.max_blocks_per_seq; ++b) {
      in.block_tables.push_back(b < static_cast<int32_t>(s.blocks.size()) ? s.blocks[b] : -1);
    }
    if (s.sample) in.samples.push_back({static_cast<int32_t>(i), params, {}, {}, 0});
  }
  return in;
}

// max |a - b| / max(1, max |b|).
inline double RelativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double max_diff = 0, max_ref = 1;
  for (size_t i = 0; i < b.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
    max_ref = std::max(max_ref, std::abs(b[i]));
  }
  return max_diff / max_ref;
}

}  // namespace rtgen::testing
