#include "engine/step_input_builder.h"

#include <algorithm>

namespace rtgen {

StepInput BuildStepInput(const ScheduledBatch& batch, int32_t block_size) {
  StepInput in;
  BuildStepInput(batch, block_size, &in);
  return in;
}

void BuildStepInput(const ScheduledBatch& batch, int32_t block_size, StepInput* out) {
  StepInput& in = *out;
  const size_t num_seqs = batch.seqs.size();
  in.token_ids.clear();
  in.positions.clear();
  in.slot_mapping.clear();
  in.query_start.clear();
  in.context_lens.clear();
  in.samples.clear();
  in.token_ids.reserve(static_cast<size_t>(batch.num_tokens));
  in.positions.reserve(static_cast<size_t>(batch.num_tokens));
  in.slot_mapping.reserve(static_cast<size_t>(batch.num_tokens));
  in.query_start.reserve(num_seqs + 1);
  in.context_lens.reserve(num_seqs);
  in.samples.reserve(num_seqs);
  in.query_start.push_back(0);
  in.is_decode_only = true;

  int32_t max_blocks = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    const int32_t context = s.seq->num_computed_tokens + s.num_new_tokens;
    max_blocks = std::max(max_blocks, (context + block_size - 1) / block_size);
  }
  in.max_blocks_per_seq = max_blocks;
  in.block_tables.assign(num_seqs * static_cast<size_t>(max_blocks), -1);

  for (size_t i = 0; i < num_seqs; ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    const Sequence& seq = *s.seq;
    const int32_t start = seq.num_computed_tokens;
    const int32_t end = start + s.num_new_tokens;
    const auto tokens = seq.tokens();
    for (int32_t pos = start; pos < end; ++pos) {
      in.token_ids.push_back(tokens[static_cast<size_t>(pos)]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(seq.block_table[static_cast<size_t>(pos / block_size)] *
                                    block_size +
                                pos % block_size);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.context_lens.push_back(end);
    const int32_t used_blocks = (end + block_size - 1) / block_size;
    std::copy_n(seq.block_table.begin(), used_blocks,
                in.block_tables.begin() + static_cast<std::ptrdiff_t>(i) * max_blocks);
    if (s.is_prefill) in.is_decode_only = false;
    if (s.samples) {
      SampleRequest sample;
      sample.seq_index = static_cast<int32_t>(i);
      sample.params = &seq.request().sampling;
      sample.prompt = seq.prompt();
      sample.output = seq.output();
      sample.seed = seq.seed();
      in.samples.push_back(sample);
    }
  }
  if (num_seqs == 0) in.is_decode_only = false;
}

}  // namespace rtgen
