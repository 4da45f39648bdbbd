#pragma once
// Diagnostic for SmolLM2 b64's draw (docs/perf/gpu_notes.md, session 77): a backend built anew
// in one process runs its kernels ~0.3 µs slower or not, in a fixed order of rounds, so the
// draw follows where its allocations land. RTGEN_DIAG_ALLOC_LOG=1 prints every device and
// pinned host allocation made through CudaMemory (device_buffer.h; the cuBLASLt workspace
// among them) to stderr, one line each, in the order made: which allocation tells fast rounds
// from slow ones (rtgen-engine-bench --model-rounds).

#include <cstddef>
#include <cstdint>
#include <string>

namespace rtgen::kernels {

// "alloc <kind> <bytes> B at 0x<address> (2 MiB page <n>, offset <bytes>)": the page is the
// address over 2 MiB, the GPU's large page, and the offset the address within it.
std::string FormatAllocation(const char* kind, size_t bytes, const void* ptr);

// Prints FormatAllocation's line to stderr where RTGEN_DIAG_ALLOC_LOG=1 (read once).
void LogAllocation(const char* kind, size_t bytes, const void* ptr);

}  // namespace rtgen::kernels
