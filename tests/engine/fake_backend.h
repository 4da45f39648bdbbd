#pragma once
// A deterministic Backend for engine tests. Its "KV cache" stores, in each slot, the token id and
// position written there. A sampled token is a hash of the context read back through the block
// table up to context_len, so it only comes out right when slot mapping, block tables, positions
// and context lengths are all right; any inconsistency is returned as an error.

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/backend.h"
#include "engine/common/splitmix64.h"
#include "tests/engine/resolve_pending_tokens.h"

namespace rtgen::testing {

// The fake model: the next token for a context, always a lowercase ASCII letter ('a'..'z').
inline int32_t FakeNextToken(std::span<const int32_t> context, uint64_t seed, bool greedy) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : context) h = SplitMix64(h ^ static_cast<uint32_t>(t));
  if (!greedy) h = SplitMix64(h ^ SplitMix64(seed + context.size()));
  return 'a' + static_cast<int32_t>(h % 26);
}

// What a request would produce run alone (greedy, no stops other than max_tokens).
inline std::vector<int32_t> FakeGreedyOutput(std::vector<int32_t> context, int32_t max_tokens) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    out.push_back(FakeNextToken(context, 0, true));
    context.push_back(out.back());
  }
  return out;
}

class FakeBackend : public Backend {
 public:
  // Scripted outputs: a request whose first prompt token is `key` emits script[n] as its n-th
  // output token (then falls back to the fake model).
  void Script(int32_t key, std::vector<int32_t> tokens) {
    absl::MutexLock lock(&mu_);
    scripts_[key] = std::move(tokens);
  }
  void FailNextSteps(int32_t n) { fail_steps_ = n; }
  void SetStepDelay(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    step_delay_ = d;
  }
  int64_t steps() const { return steps_; }
  // Launched steps whose input named a token of the step before (PendingToken).
  int64_t pending_steps() const { return pending_steps_; }
  int32_t max_step_tokens() const { return max_step_tokens_; }

  std::string name() const override { return "fake"; }
  absl::Status AllocateKvCache(const KvCacheShape& shape) override {
    absl::MutexLock lock(&mu_);
    shape_ = shape;
    const size_t n = static_cast<size_t>(shape.num_blocks) * static_cast<size_t>(shape.block_size);
    kv_token_.assign(n, -1);
    kv_pos_.assign(n, -1);
    return absl::OkStatus();
  }
  int64_t KvBytesPerBlock(int32_t block_size) const override { return 8LL * block_size; }

  // Pipelined like a device backend (its steps run inside Launch, which only shifts when their
  // tokens are streamed), so the engine tests exercise async scheduling: Launch fills in the
  // stand-ins from the previous step's tokens (ResolvePendingTokens).
  bool OverlapsSteps() const override { return true; }
  // Rows sampled with a repetition penalty do not chain once their prompt and output hold more
  // than the limit's tokens (as the CUDA backend's host-sampled rows; limit 0: never chain).
  bool ChainsSample(const SampleRequest& sample) const override {
    return sample.params->repetition_penalty == 1.0f ||
           sample.prompt.size() + sample.output.size() <=
               static_cast<size_t>(penalty_chain_limit_);
  }
  void set_penalty_chain_limit(int32_t tokens) { penalty_chain_limit_ = tokens; }

  absl::Status Launch(const StepInput& in) override {
    if (HasPendingTokens(in)) ++pending_steps_;
    bool unchained = false;
    for (const SampleRequest& s : in.samples) unchained = unchained || !ChainsSample(s);
    {
      absl::MutexLock lock(&mu_);
      // Launched while the step before, with a row that cannot chain, was not collected yet.
      if (!in_flight_unchained_.empty() && in_flight_unchained_.back()) ++unchained_overlaps_;
      in_flight_unchained_.push_back(unchained);
      unchained_steps_ += unchained;
    }
    if (!HasPendingTokens(in)) return Backend::Launch(in);
    std::vector<int32_t> previous;
    {
      absl::MutexLock lock(&mu_);
      previous = last_sampled_;
    }
    StepInput resolved;
    std::vector<std::vector<int32_t>> outputs;
    const absl::Status st = ResolvePendingTokens(in, previous, &resolved, &outputs);
    if (st.ok()) return Backend::Launch(resolved);
    {
      absl::MutexLock lock(&mu_);
      last_sampled_.assign(in.samples.size(), 0);
    }
    return Backend::Launch(in);  // refuses the stand-ins: Collect reports INVALID_ARGUMENT
  }
  absl::StatusOr<StepOutput> Collect() override {
    {
      absl::MutexLock lock(&mu_);
      if (!in_flight_unchained_.empty()) in_flight_unchained_.pop_front();
    }
    return Backend::Collect();
  }
  // Steps with a row that cannot chain, and launches that overlapped such a step.
  int64_t unchained_steps() {
    absl::MutexLock lock(&mu_);
    return unchained_steps_;
  }
  int64_t unchained_overlaps() {
    absl::MutexLock lock(&mu_);
    return unchained_overlaps_;
  }

  // Runs the step and keeps its tokens for the next step's stand-ins. A failed step's samples
  // stand in as token 0: their sequences fail with it, so their rows are dropped.
  absl::StatusOr<StepOutput> Execute(const StepInput& in) override {
    absl::StatusOr<StepOutput> out = Run(in);
    absl::MutexLock lock(&mu_);
    last_sampled_.assign(in.samples.size(), 0);
    if (out.ok()) {
      for (size_t i = 0; i < out->sampled.size(); ++i) last_sampled_[i] = out->sampled[i].token_id;
    }
    return out;
  }

  absl::StatusOr<std::vector<float>> ComputeLogits(const StepInput&) override {
    return absl::UnimplementedError("fake backend has no logits");
  }

 private:
  absl::StatusOr<StepOutput> Run(const StepInput& in) {
    absl::MutexLock lock(&mu_);
    if (step_delay_ > absl::ZeroDuration()) absl::SleepFor(step_delay_);
    ++steps_;
    if (in.num_tokens() > max_step_tokens_) max_step_tokens_ = in.num_tokens();
    if (in.positions.size() != in.token_ids.size() || in.slot_mapping.size() != in.token_ids.size() ||
        in.query_start.size() != static_cast<size_t>(in.num_seqs()) + 1 ||
        in.block_tables.size() != static_cast<size_t>(in.num_seqs() * in.max_blocks_per_seq) ||
        in.query_start.back() != in.num_tokens()) {
      return absl::InternalError("inconsistent StepInput sizes");
    }
    const int32_t total = static_cast<int32_t>(kv_token_.size());
    for (int32_t s = 0; s < in.num_seqs(); ++s) {
      const int32_t begin = in.query_start[s], end = in.query_start[s + 1];
      if (end <= begin) return absl::InternalError(absl::StrCat("sequence ", s, " has no tokens"));
      if (in.positions[end - 1] != in.context_lens[s] - 1) {
        return absl::InternalError(absl::StrCat("sequence ", s, ": last position ",
                                                in.positions[end - 1], " != context_len - 1"));
      }
      for (int32_t t = begin; t < end; ++t) {
        const int32_t slot = in.slot_mapping[t];
        const int32_t pos = in.positions[t];
        const int32_t block = in.block_tables[s * in.max_blocks_per_seq + pos / shape_.block_size];
        if (slot < 0 || slot >= total || slot != block * shape_.block_size + pos % shape_.block_size) {
          return absl::InternalError(absl::StrCat("token ", t, ": slot ", slot, " disagrees with the block table"));
        }
        kv_token_[slot] = in.token_ids[t];
        kv_pos_[slot] = pos;
      }
    }
    // An injected failure comes after the KV writes, as a device error found when the step is
    // collected: a pipelined step launched after it may already read this step's KV.
    if (fail_steps_ > 0) {
      --fail_steps_;
      return absl::InternalError("injected backend failure");
    }
    StepOutput out;
    for (const SampleRequest& sample : in.samples) {
      const int32_t s = sample.seq_index;
      std::vector<int32_t> context;
      for (int32_t p = 0; p < in.context_lens[s]; ++p) {
        const int32_t block = in.block_tables[s * in.max_blocks_per_seq + p / shape_.block_size];
        if (block < 0) return absl::InternalError(absl::StrCat("position ", p, " has no block"));
        const int32_t slot = block * shape_.block_size + p % shape_.block_size;
        if (kv_pos_[slot] != p) {
          return absl::InternalError(absl::StrCat("slot ", slot, " holds position ", kv_pos_[slot],
                                                  ", expected ", p));
        }
        context.push_back(kv_token_[slot]);
      }
      // The KV context must be exactly prompt + output so far.
      std::vector<int32_t> expected(sample.prompt.begin(), sample.prompt.end());
      expected.insert(expected.end(), sample.output.begin(), sample.output.end());
      if (context != expected) return absl::InternalError("KV context differs from the sequence");
      SampledToken token;
      const size_t n = sample.output.size();
      auto it = scripts_.find(sample.prompt[0]);
      if (it != scripts_.end() && n < it->second.size()) {
        token.token_id = it->second[n];
      } else {
        token.token_id = FakeNextToken(context, sample.seed, sample.params->greedy());
      }
      token.logprob = -0.5f;
      out.sampled.push_back(token);
    }
    return out;
  }

  absl::Mutex mu_;
  KvCacheShape shape_;
  std::vector<int32_t> kv_token_;
  std::vector<int32_t> kv_pos_;
  std::map<int32_t, std::vector<int32_t>> scripts_;
  absl::Duration step_delay_ = absl::ZeroDuration();
  std::atomic<int32_t> fail_steps_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> pending_steps_{0};
  std::vector<int32_t> last_sampled_;   // the last step's tokens (stand-ins of the next step)
  std::deque<bool> in_flight_unchained_;  // launched, not collected: has a row that cannot chain
  int64_t unchained_steps_ = 0;
  int64_t unchained_overlaps_ = 0;
  std::atomic<int32_t> max_step_tokens_{0};
  int32_t penalty_chain_limit_ = 0;  // set before the engine starts
};

}  // namespace rtgen::testing
