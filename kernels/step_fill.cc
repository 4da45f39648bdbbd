#include "kernels/step_fill.h"

#include <algorithm>

#include "engine/pending_token.h"

namespace rtgen {

void FillStepInputs(const StepInput& in, const StepArrays& h, int32_t width,
                    absl::FunctionRef<int32_t(int32_t)> pending_row) {
  for (int32_t t = 0; t < in.num_tokens(); ++t) {
    const int32_t id = in.token_ids[t];
    h.token_ids[t] = IsPendingToken(id) ? -1 - pending_row(id) : id;
  }
  std::copy(in.positions.begin(), in.positions.end(), h.positions);
  std::copy(in.slot_mapping.begin(), in.slot_mapping.end(), h.slot_mapping);
  for (int32_t q = 0; q < in.num_seqs(); ++q) {
    std::fill(h.token_seq + in.query_start[q], h.token_seq + in.query_start[q + 1], q);
    h.context_lens[q] = in.context_lens[q];
    std::copy_n(in.block_tables.data() + int64_t{q} * in.max_blocks_per_seq,
                in.max_blocks_per_seq, h.block_tables + int64_t{q} * width);
  }
}

void PadRows(const StepArrays& h, int32_t from, int32_t to, bool prefill) {
  for (int32_t t = from; t < to; ++t) {
    h.token_ids[t] = 0;
    h.positions[t] = prefill ? -1 : 0;
    h.slot_mapping[t] = -1;
    h.token_seq[t] = prefill ? 0 : t;
    h.attention_positions[t] = h.positions[t];
  }
}

void PadSeqs(const StepArrays& h, int32_t from, int32_t to, bool prefill) {
  for (int32_t q = from; q < to; ++q) {
    h.context_lens[q] = 0;
    h.decode_context_lens[q] = 0;
    h.sample_rows[q] = prefill ? 0 : q;
    h.sample_params[q] = kernels::SampleRowParams{};  // greedy
  }
}

void MarkDecodeRows(const StepInput& in, const StepArrays& h, int32_t seqs) {
  std::copy(in.positions.begin(), in.positions.end(), h.attention_positions);
  std::fill(h.decode_context_lens, h.decode_context_lens + seqs, 0);
  for (int32_t q = 0; q < in.num_seqs(); ++q) {
    if (in.query_start[q] == q && in.query_start[q + 1] == q + 1 &&
        in.positions[q] == in.context_lens[q] - 1) {
      h.decode_context_lens[q] = in.context_lens[q];
      h.attention_positions[q] = kernels::kPrefillKeepRow;
    }
  }
}

int32_t FillSampleRows(const StepInput& in, int32_t decode_bucket, int32_t prefill_rows,
                       const StepArrays& h, std::vector<int32_t>* sample_row,
                       bool* in_token_order) {
  const int32_t samples = static_cast<int32_t>(in.samples.size());
  sample_row->resize(in.samples.size());
  *in_token_order = true;
  if (decode_bucket > 0) {  // every row of the graph computes logits and samples
    for (int32_t r = 0; r < decode_bucket; ++r) {
      h.sample_rows[r] = r;
      h.sample_params[r] = kernels::SampleRowParams{};
    }
    for (int32_t i = 0; i < samples; ++i) (*sample_row)[i] = in.samples[i].seq_index;
    return decode_bucket;
  }
  for (int32_t i = 0; i < samples; ++i) {
    h.sample_rows[i] = in.query_start[in.samples[i].seq_index + 1] - 1;
    *in_token_order = *in_token_order && h.sample_rows[i] == i;
    (*sample_row)[i] = i;
  }
  int32_t rows = samples;
  for (; rows < prefill_rows; ++rows) {
    h.sample_rows[rows] = 0;
    h.sample_params[rows] = kernels::SampleRowParams{};
  }
  return rows;
}

}  // namespace rtgen
