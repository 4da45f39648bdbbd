#pragma once
// The check both backends make of a step's samples (engine/backend.h StepInput::samples), so the
// CPU and CUDA backends refuse the same malformed steps with the same words.

#include "absl/status/status.h"
#include "engine/backend.h"

namespace rtgen {

// OK when every sample names a sequence of the step (0 <= seq_index < num_seqs) that has tokens
// in it (its logits row is that sequence's last token), has parameters where `params_required`
// (the CPU backend's logits-only path needs none), and no other sample names the same sequence:
// a sequence takes one next token a step (a second sample of its last row would be a second,
// different token for the same position). Precondition: query_start has num_seqs + 1 entries
// (each backend checks that first).
absl::Status CheckStepSamples(const StepInput& in, bool params_required);

}  // namespace rtgen
