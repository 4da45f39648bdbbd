#pragma once
// The host side of device sampling: which rows of a step the CUDA backend samples on the host
// (from the row's logits, with the CPU sampler) and the parameters the device sampler
// (kernels/sampling.h) reads for every other row. Host code without CUDA, built everywhere, so
// the CPU-only CI tests it (tests/kernels_host).

#include <cstdint>

#include "engine/backend.h"
#include "kernels/sample_row_params.h"

namespace rtgen {

// Rows sampled on the host with the CPU sampler: penalties over more tokens than the device
// takes (CudaBackendOptions::max_penalty_tokens), and more top-n logprobs than it returns
// (SamplingParams::Validate allows no more than it does).
bool NeedsHostSampling(const SampleRequest& s, int32_t max_penalty_tokens);

// The row's parameters but its penalties (PenaltyEntryBuilder::Append sets those). The draw's
// counter is the number of tokens generated so far (output.size()), as on the CPU sampler: the
// same seed draws the same uniforms on either backend, and from the same logits the same tokens
// but where a draw or a top-p / min-p cut falls within rounding of a boundary (the device's
// expf and block sums against the CPU's std::exp and sequential sums).
kernels::SampleRowParams DeviceParams(const SampleRequest& s);

}  // namespace rtgen
