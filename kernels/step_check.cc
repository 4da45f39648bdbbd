#include "kernels/step_check.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/pending_token.h"
#include "engine/sampling/step_samples_check.h"

namespace rtgen {
namespace {

// Two tokens stored to one slot in a step (a position repeated within a sequence, or two
// sequences writing a shared block) would race on the device: which key lands depends on
// timing, where the CPU backend's last write wins. Sorts the n tokens' stored slots (-1: none);
// CheckCudaStep skips it for a one-token step (batch-1 decode, the latency path).
absl::Status CheckSlotsStoredOnce(const std::vector<int32_t>& slot_mapping, int32_t n) {
  std::vector<std::pair<int32_t, int32_t>> stored;  // (slot, token)
  stored.reserve(n);
  for (int32_t t = 0; t < n; ++t) {
    if (slot_mapping[t] != -1) stored.emplace_back(slot_mapping[t], t);
  }
  std::sort(stored.begin(), stored.end());
  for (size_t i = 1; i < stored.size(); ++i) {
    if (stored[i].first == stored[i - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slot_mapping[", stored[i].second, "] = ", stored[i].first, " is also slot_mapping[",
          stored[i - 1].second, "]: one step stores one token a slot"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCudaStep(const StepInput& in, const CudaStepLimits& cap,
                           absl::FunctionRef<int32_t(int32_t)> pending_row) {
  const int32_t n = in.num_tokens(), s = in.num_seqs();
  const int32_t bs = cap.block_size, nb = cap.num_blocks;
  if (n <= 0 || n > cap.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("step has ", n, " tokens; the CUDA backend takes 1..", cap.max_tokens));
  }
  if (s <= 0 || s > cap.max_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("step has ", s, " sequences; the CUDA backend takes 1..", cap.max_seqs));
  }
  if (static_cast<int32_t>(in.positions.size()) != n ||
      static_cast<int32_t>(in.slot_mapping.size()) != n) {
    return absl::InvalidArgumentError("positions and slot_mapping must have one entry per token");
  }
  if (static_cast<int32_t>(in.query_start.size()) != s + 1 || in.query_start[0] != 0 ||
      in.query_start[s] != n) {
    return absl::InvalidArgumentError("query_start must have num_seqs + 1 entries from 0 to "
                                      "num_tokens");
  }
  if (in.max_blocks_per_seq < 0 || in.max_blocks_per_seq > cap.max_blocks_per_seq ||
      static_cast<int64_t>(in.block_tables.size()) != int64_t{s} * in.max_blocks_per_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block_tables must be num_seqs x max_blocks_per_seq with max_blocks_per_seq <= ",
        cap.max_blocks_per_seq));
  }
  for (int32_t q = 0; q < s; ++q) {
    const int32_t lo = in.query_start[q], hi = in.query_start[q + 1], ctx = in.context_lens[q];
    // hi <= n too: the positions of [lo, hi) are read below, before the next sequence's check.
    if (hi < lo || hi > n || (in.is_decode_only && (lo != q || hi != q + 1))) {
      return absl::InvalidArgumentError(absl::StrCat("query_start of sequence ", q, " is bad"));
    }
    if (ctx < 0 || ctx > int64_t{in.max_blocks_per_seq} * bs) {
      return absl::InvalidArgumentError(
          absl::StrCat("context_lens[", q, "] = ", ctx, " does not fit its block table"));
    }
    const int32_t* row = in.block_tables.data() + int64_t{q} * in.max_blocks_per_seq;
    for (int32_t j = 0; j < (ctx + bs - 1) / bs; ++j) {
      if (row[j] < 0 || row[j] >= nb) {
        return absl::InvalidArgumentError(absl::StrCat("block_tables[", q, "][", j, "] = ",
                                                       row[j], " is not a block of the pool"));
      }
    }
    for (int32_t t = lo; t < hi; ++t) {
      if (in.positions[t] < 0 || in.positions[t] >= ctx) {
        return absl::InvalidArgumentError(absl::StrCat("positions[", t, "] = ", in.positions[t],
                                                       " is outside its context of ", ctx));
      }
      if (in.slot_mapping[t] < -1 || in.slot_mapping[t] >= int64_t{nb} * bs) {
        return absl::InvalidArgumentError(
            absl::StrCat("slot_mapping[", t, "] = ", in.slot_mapping[t], " is outside the pool"));
      }
      // Attention reads position p through the block table, so a token's key is stored there or
      // nowhere (-1): any other slot would leave a stale key in its place and overwrite a key of
      // whichever sequence owns that slot. (Decode rows: below, with their own message.)
      const int32_t pos = in.positions[t];
      const int64_t slot = int64_t{row[pos / bs]} * bs + pos % bs;
      if (!in.is_decode_only && in.slot_mapping[t] != -1 && in.slot_mapping[t] != slot) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slot_mapping[", t, "] = ", in.slot_mapping[t], " must be -1 or the slot of position ",
            pos, " through its block table (", slot, ")"));
      }
    }
    // A decode step writes only each sequence's newest key: decode attention may read the older
    // ones before the step's qkv launch has completed (DecodeAttentionParams::prefetch_kv).
    if (in.is_decode_only) {
      const int32_t newest = ctx - 1;
      const int64_t slot = int64_t{row[newest / bs]} * bs + newest % bs;
      if (in.positions[q] != newest) {
        return absl::InvalidArgumentError(absl::StrCat(
            "positions[", q, "] = ", in.positions[q], " in a decode-only step must be its "
            "context's last position, ", newest));
      }
      if (in.slot_mapping[q] != -1 && in.slot_mapping[q] != slot) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slot_mapping[", q, "] = ", in.slot_mapping[q], " in a decode-only step must be -1 "
            "or the slot of position ", newest, " (", slot, ")"));
      }
    }
  }
  if (n > 1) {  // a one-token step stores one slot at most
    RETURN_IF_ERROR(CheckSlotsStoredOnce(in.slot_mapping, n));
  }
  for (int32_t t = 0; t < n; ++t) {
    const int32_t id = in.token_ids[t];
    if (!IsPendingToken(id) && id >= cap.vocab_size) {  // the embedding would read past its table
      return absl::InvalidArgumentError(absl::StrCat(
          "token_ids[", t, "] = ", id, " is outside the vocabulary [0, ", cap.vocab_size, ")"));
    }
    if (IsPendingToken(in.token_ids[t]) && pending_row(in.token_ids[t]) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token_ids[", t, "] = ", in.token_ids[t], " names sample ",
          PendingSampleIndex(in.token_ids[t]),
          " of the previous step, which is not in flight, did not sample it on the device, or was "
          "followed by a launch that failed once its sampler was queued"));
    }
  }
  if (static_cast<int32_t>(in.samples.size()) > cap.max_seqs) {
    return absl::InvalidArgumentError("more samples than the CUDA backend's max_num_seqs");
  }
  RETURN_IF_ERROR(CheckStepSamples(in, /*params_required=*/true));
  // The engine validates a request's parameters when it is submitted; a direct caller's reach
  // the sampler here (a repetition penalty of 0 makes the penalized logits infinite).
  for (size_t i = 0; i < in.samples.size(); ++i) {
    if (const absl::Status st = in.samples[i].params->Validate(cap.vocab_size); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("samples[", i, "].params: ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace rtgen
