// CpuBackend's forward pass: step validation and ComputeLogits.

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/rope.h"
#include "engine/cpu/vector_ops.h"
#include "engine/sampling/step_samples_check.h"

namespace rtgen {

absl::Status CpuBackend::CheckStep(const StepInput& in) const {
  if (k_cache_.empty()) return absl::FailedPreconditionError("AllocateKvCache was not called");
  const size_t t = in.token_ids.size();
  const int32_t s = in.num_seqs();
  if (in.positions.size() != t || in.slot_mapping.size() != t) {
    return absl::InvalidArgumentError(absl::StrCat("step has ", t, " token_ids but ",
                                                   in.positions.size(), " positions and ",
                                                   in.slot_mapping.size(), " slot_mapping"));
  }
  if (in.query_start.size() != static_cast<size_t>(s) + 1 || in.query_start[0] != 0 ||
      in.query_start[s] != static_cast<int32_t>(t)) {
    return absl::InvalidArgumentError(
        "step query_start must have num_seqs + 1 entries from 0 to num_tokens");
  }
  if (in.max_blocks_per_seq < 0 ||
      in.block_tables.size() != static_cast<size_t>(s) * in.max_blocks_per_seq) {
    return absl::InvalidArgumentError("step block_tables must be num_seqs * max_blocks_per_seq");
  }
  for (int32_t seq = 0; seq < s; ++seq) {
    // Past the token count, the positions of [query_start[seq], query_start[seq + 1]) would be
    // read out of bounds below, before the next entry's check.
    if (in.query_start[seq + 1] < in.query_start[seq] ||
        in.query_start[seq + 1] > static_cast<int32_t>(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step query_start[", seq + 1, "] = ", in.query_start[seq + 1],
          " is below the entry before it or past the ", t, " tokens"));
    }
    const int32_t len = in.context_lens[seq];
    // In 64 bits: a length near INT32_MAX would wrap the rounding up to a negative count, which
    // passed this check and left attention reading past the table.
    const int64_t blocks = (int64_t{len} + kv_layout_.block_size - 1) / kv_layout_.block_size;
    if (len < 0 || blocks > in.max_blocks_per_seq) {
      return absl::InvalidArgumentError(absl::StrCat("step context_lens[", seq, "] = ", len,
                                                     " needs more blocks than the table has"));
    }
    for (int32_t b = 0; b < blocks; ++b) {
      const int32_t block = in.block_tables[static_cast<size_t>(seq) * in.max_blocks_per_seq + b];
      if (block < 0 || block >= kv_layout_.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("step block_tables[", seq, "][", b,
                                                       "] = ", block, " is outside the pool"));
      }
    }
    for (int32_t i = in.query_start[seq]; i < in.query_start[seq + 1]; ++i) {
      if (in.positions[i] < 0 || in.positions[i] >= len) {
        return absl::InvalidArgumentError(absl::StrCat("step positions[", i, "] = ",
                                                       in.positions[i], " outside [0, ", len,
                                                       ") of its sequence"));
      }
      // Attention reads position p through the block table, so its K/V must be stored exactly
      // there: any other slot (or none, -1) would leave stale values in its place, and a slot
      // of another sequence's block would overwrite that sequence's cache.
      const int32_t pos = in.positions[i], bs = kv_layout_.block_size;
      const int64_t slot =
          int64_t{in.block_tables[static_cast<size_t>(seq) * in.max_blocks_per_seq + pos / bs]} *
              bs + pos % bs;
      if (in.slot_mapping[i] != slot) {
        return absl::InvalidArgumentError(absl::StrCat(
            "step slot_mapping[", i, "] = ", in.slot_mapping[i], " is not the slot of position ",
            pos, " through its block table (", slot, ")"));
      }
      if (in.token_ids[i] < 0 || in.token_ids[i] >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("step token_ids[", i, "] = ", in.token_ids[i], " is outside the vocab"));
      }
    }
  }
  // As the CUDA backend checks them; Step checks their parameters (ComputeLogits needs none).
  return CheckStepSamples(in, /*params_required=*/false);
}

absl::StatusOr<std::vector<float>> CpuBackend::ComputeLogits(const StepInput& in) {
  RETURN_IF_ERROR(CheckStep(in));
  const int64_t num_tokens = in.num_tokens();
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t q_dim = int64_t{config_.num_heads} * head_dim;
  const int64_t kv_dim = int64_t{config_.num_kv_heads} * head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const int64_t ffn = config_.intermediate_size;
  const float eps = config_.rms_norm_eps;

  // Activations, all fp32, row t = token t.
  std::vector<float> x(num_tokens * hidden), h(num_tokens * hidden);
  std::vector<float> qkv(num_tokens * qkv_dim), q(num_tokens * q_dim), k(num_tokens * kv_dim),
      v(num_tokens * kv_dim), attn(num_tokens * q_dim);
  std::vector<float> gate_up(num_tokens * 2 * ffn), act(num_tokens * ffn);
  std::vector<float> cos_sin(num_tokens * head_dim);  // per token: [cos | sin], head_dim/2 each
  std::vector<int32_t> token_seq(num_tokens);
  for (int32_t seq = 0; seq < in.num_seqs(); ++seq) {
    std::fill(token_seq.begin() + in.query_start[seq], token_seq.begin() + in.query_start[seq + 1],
              seq);
  }
  for (int64_t t = 0; t < num_tokens; ++t) {
    embedding_.RowToF32(in.token_ids[t], x.data() + t * hidden);
    RopeCosSin(inv_freq_, in.positions[t], cos_sin.data() + t * head_dim);
  }

  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const Layer& w = layers_[layer];
    for (int64_t t = 0; t < num_tokens; ++t) {
      RmsNorm(x.data() + t * hidden, w.attn_norm.data(), hidden, eps, h.data() + t * hidden);
    }
    Linear(w.wqkv, h.data(), hidden, num_tokens, qkv.data(), qkv_dim, false, pool_);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* row = qkv.data() + t * qkv_dim;
      float* qt = q.data() + t * q_dim;
      float* kt = k.data() + t * kv_dim;
      std::copy_n(row, q_dim, qt);
      std::copy_n(row + q_dim, kv_dim, kt);
      std::copy_n(row + q_dim + kv_dim, kv_dim, v.data() + t * kv_dim);
      ApplyRope(qt, config_.num_heads, head_dim, cos_sin.data() + t * head_dim);
      ApplyRope(kt, config_.num_kv_heads, head_dim, cos_sin.data() + t * head_dim);
    }
    WriteKv(in, k.data(), v.data(), kv_layout_, k_cache_[layer].data(), v_cache_[layer].data());
    PagedAttention(in, token_seq.data(), q.data(), config_.num_heads, kv_layout_,
                   k_cache_[layer].data(), v_cache_[layer].data(), attn.data(), pool_);
    Linear(w.wo, attn.data(), q_dim, num_tokens, x.data(), hidden, true, pool_);

    for (int64_t t = 0; t < num_tokens; ++t) {
      RmsNorm(x.data() + t * hidden, w.ffn_norm.data(), hidden, eps, h.data() + t * hidden);
    }
    Linear(w.w_gate_up, h.data(), hidden, num_tokens, gate_up.data(), 2 * ffn, false, pool_);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* g = gate_up.data() + t * 2 * ffn;
      SiluMul(g, g + ffn, ffn, act.data() + t * ffn);
    }
    Linear(w.w_down, act.data(), ffn, num_tokens, x.data(), hidden, true, pool_);
  }

  // Final norm and LM head only for the sampled rows (the last token of each sequence).
  const int64_t num_samples = static_cast<int64_t>(in.samples.size());
  std::vector<float> last(num_samples * hidden);
  for (int64_t i = 0; i < num_samples; ++i) {
    const int64_t t = in.query_start[in.samples[i].seq_index + 1] - 1;
    RmsNorm(x.data() + t * hidden, final_norm_.data(), hidden, eps, last.data() + i * hidden);
  }
  const int64_t vocab = config_.vocab_size;
  std::vector<float> logits(num_samples * vocab);
  Linear(output_matrix(), last.data(), hidden, num_samples, logits.data(), vocab, false, pool_);
  return logits;
}

}  // namespace rtgen
