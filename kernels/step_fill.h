#pragma once
// How the CUDA backend fills a step's pinned arrays (step_arrays.h) before their upload: the
// step's own rows, a CUDA graph's padding rows and sequences past them (ARCHITECTURE.md: padded
// rows write no KV and their outputs are ignored), and a mixed step's decode rows. Host code
// without CUDA, built everywhere, so the CPU-only CI tests it (tests/kernels_host).

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "engine/backend.h"
#include "kernels/step_arrays.h"

namespace rtgen {

// The step's inputs into h (a layout of at least the step's tokens and sequences, whose block
// tables are `width` columns wide): token ids, positions, slot mapping, each token's sequence,
// context lengths and block table rows. A PendingToken names a sample of the previous step; the
// embedding reads it from that step's logits row r (ModelForward's chain tokens), which
// `pending_row` gives, and h holds it as -1 - r. Rows and sequences past the step's are left as
// they are (PadRows, PadSeqs).
void FillStepInputs(const StepInput& in, const StepArrays& h, int32_t width,
                    absl::FunctionRef<int32_t(int32_t)> pending_row);

// Rows [from, to) of h as graph padding: no token, no KV write. A decode row is a sequence of its
// own (context_lens 0: attention gives zeros); a prefill row (prefill) has position -1, which
// both prefill attention kernels give zeros, and belongs to sequence 0.
void PadRows(const StepArrays& h, int32_t from, int32_t to, bool prefill);

// Sequences [from, to) of h as graph padding: no keys, and their logits rows (a decode step's
// row q, a prefill step's row 0) sampled greedily and never read.
void PadSeqs(const StepArrays& h, int32_t from, int32_t to, bool prefill);

// A step that is not decode-only: its decode rows (ModelForward::SplitsDecodeRows), each
// sequence q whose only token is row q, at its newest position, go to decode attention with its
// context (decode_context_lens, 0 for every other sequence of the layout's `seqs`), and prefill
// attention leaves those rows (attention_positions: kPrefillKeepRow there, else the position).
// The engine's scheduler puts a step's decode rows first; rows in any other order stay prefill
// attention's.
void MarkDecodeRows(const StepInput& in, const StepArrays& h, int32_t seqs);

// The logits rows a step computes (h.sample_rows, each with greedy parameters until its
// sample's are set): a decode graph's are all its bucket's rows (`decode_bucket` > 0; row r is
// token r); otherwise one a sample, its sequence's last token of the step, then a prefill graph's
// rows past them up to `prefill_rows` (its variant), on token row 0, sampled and never read.
// (*sample_row)[i] is samples[i]'s logits row; *in_token_order is whether every sample's logits
// row i is token row i. Returns the logits rows computed.
int32_t FillSampleRows(const StepInput& in, int32_t decode_bucket, int32_t prefill_rows,
                       const StepArrays& h, std::vector<int32_t>* sample_row,
                       bool* in_token_order);

}  // namespace rtgen
