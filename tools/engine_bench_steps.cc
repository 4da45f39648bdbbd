#include "tools/engine_bench_steps.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/splitmix64.h"

namespace rtgen::tools {

SamplingParams BenchSampling(bool penalties, int32_t logprobs) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = logprobs;
  if (penalties) {
    p.repetition_penalty = 1.1f;
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;
  }
  return p;
}

bool PenaltiesOnHost(const EngineBenchOptions& o) {
  return o.penalties && !kernels::PenalizesOnDevice(BenchSampling(true), o.prompt, o.steps,
                                                    o.max_penalty_tokens);
}

std::string SamplingLabel(const EngineBenchOptions& o) {
  const std::string top =
      o.logprobs > 0 ? absl::StrCat(", top ", o.logprobs, " logprobs per row") : "";
  if (!o.penalties) return absl::StrCat("greedy", top);
  return absl::StrCat("greedy after penalties (repetition 1.1, presence 0.3, frequency 0.2) ",
                      PenaltiesOnHost(o) ? "on the host" : "on the device", top);
}

int32_t DecodeBlocksPerSeq(const EngineBenchOptions& o) {
  return (o.prompt + o.steps + kBenchBlockSize - 1) / kBenchBlockSize;
}

int32_t TtftBlocks(int32_t prompt) { return prompt / kBenchBlockSize + 1; }

BenchKvNeeds BenchKv(const EngineBenchOptions& o) {
  BenchKvNeeds n;
  n.max_seqs = *std::max_element(o.batches.begin(), o.batches.end());
  n.blocks = n.max_seqs * DecodeBlocksPerSeq(o);
  for (int32_t p : o.ttft_prompts) n.blocks = std::max(n.blocks, TtftBlocks(p));
  for (const auto& [decode, prompt] : o.mixed) {
    n.blocks = std::max(n.blocks, (decode + 1) * MixedBlocksPerSeq(o));
    n.max_seqs = std::max(n.max_seqs, decode + 1);
  }
  return n;
}

int32_t MixedBlocksPerSeq(const EngineBenchOptions& o) {
  int32_t tokens = o.prompt + 1;
  for (const auto& [decode, prompt] : o.mixed) tokens = std::max(tokens, prompt);
  return (tokens + kBenchBlockSize - 1) / kBenchBlockSize;
}

BenchBatch::BenchBatch(int32_t size, int32_t blocks_per_seq, uint64_t seed,
                       const SamplingParams& params)
    : size_(size), blocks_per_seq_(blocks_per_seq), last_(size), seed_(seed), params_(params) {}

int32_t BenchBatch::PromptToken(int32_t s, int32_t p, int32_t vocab) const {
  // Every seed gives other prompts.
  const uint64_t h = SplitMix64(SplitMix64(seed_) ^ (static_cast<uint64_t>(s) << 32 |
                                                     static_cast<uint32_t>(p)));
  return static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
}

StepInput BenchBatch::Step(int32_t first, int32_t count, int32_t start, int32_t len,
                           int32_t vocab) const {
  StepInput in;
  in.max_blocks_per_seq = blocks_per_seq_;
  in.is_decode_only = len == 1;
  in.query_start.push_back(0);
  for (int32_t q = 0; q < count; ++q) {
    const int32_t s = first + q;
    for (int32_t p = start; p < start + len; ++p) {
      in.token_ids.push_back(len == 1 ? last_[s] : PromptToken(s, p, vocab));
      in.positions.push_back(p);
      in.slot_mapping.push_back((s * blocks_per_seq_ + p / kBenchBlockSize) * kBenchBlockSize +
                                p % kBenchBlockSize);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.context_lens.push_back(start + len);
    for (int32_t j = 0; j < blocks_per_seq_; ++j) {
      in.block_tables.push_back(s * blocks_per_seq_ + j);
    }
    in.samples.push_back(SampleRequest{q, &params_, {}, {}, seed_});
  }
  return in;
}

absl::Status BenchBatch::Take(const StepOutput& out, int32_t first, int32_t vocab) {
  for (size_t i = 0; i < out.sampled.size(); ++i) {
    const int32_t t = out.sampled[i].token_id;
    if (t < 0 || t >= vocab) {
      return absl::InternalError(absl::StrCat("sampled token ", t, " is outside the vocab"));
    }
    const std::vector<TokenLogprob>& top = out.sampled[i].top;
    if (static_cast<int32_t>(top.size()) != params_.logprobs ||
        (!top.empty() && top[0].token_id != t)) {
      return absl::InternalError(absl::StrCat("sampled token ", t, " came with ", top.size(),
                                              " top logprobs (asked for ", params_.logprobs,
                                              "), not led by it"));
    }
    last_[first + i] = t;
  }
  return absl::OkStatus();
}

SeqTokens::SeqTokens(const BenchBatch& batch, int32_t prompt, int32_t steps, int32_t vocab)
    : prompts(batch.size()), outputs(batch.size()) {
  for (int32_t s = 0; s < batch.size(); ++s) {
    for (int32_t p = 0; p < prompt; ++p) prompts[s].push_back(batch.PromptToken(s, p, vocab));
    outputs[s].reserve(steps + 2);
  }
}

void SeqTokens::Restart(const std::vector<int32_t>& first) {
  for (size_t s = 0; s < outputs.size(); ++s) outputs[s].assign(1, first[s]);
}

void SeqTokens::Name(StepInput& in) const {
  for (size_t s = 0; s < in.samples.size(); ++s) {
    in.samples[s].prompt = prompts[s];
    in.samples[s].output = outputs[s];
  }
}

StepInput JoinSteps(StepInput a, const StepInput& b) {
  const int32_t tokens = a.num_tokens(), seqs = a.num_seqs();
  a.is_decode_only = a.is_decode_only && b.is_decode_only;
  a.token_ids.insert(a.token_ids.end(), b.token_ids.begin(), b.token_ids.end());
  a.positions.insert(a.positions.end(), b.positions.begin(), b.positions.end());
  a.slot_mapping.insert(a.slot_mapping.end(), b.slot_mapping.begin(), b.slot_mapping.end());
  for (size_t q = 1; q < b.query_start.size(); ++q) {
    a.query_start.push_back(tokens + b.query_start[q]);
  }
  a.context_lens.insert(a.context_lens.end(), b.context_lens.begin(), b.context_lens.end());
  a.block_tables.insert(a.block_tables.end(), b.block_tables.begin(), b.block_tables.end());
  for (SampleRequest r : b.samples) {
    r.seq_index += seqs;
    a.samples.push_back(r);
  }
  return a;
}

}  // namespace rtgen::tools
