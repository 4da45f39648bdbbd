#pragma once
// Flattens a ScheduledBatch into the backend's StepInput (CSR token layout, slot mapping, block
// tables, sampling rows).

#include <cstdint>

#include "engine/backend.h"
#include "engine/scheduler.h"

namespace rtgen {

// The spans in the returned samples point into the batch's sequences: use the input before the
// batch is postprocessed.
StepInput BuildStepInput(const ScheduledBatch& batch, int32_t block_size);
// The same into `in`, reusing its vectors' capacity (the engine keeps one across steps).
void BuildStepInput(const ScheduledBatch& batch, int32_t block_size, StepInput* in);

}  // namespace rtgen
