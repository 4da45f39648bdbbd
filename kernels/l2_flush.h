#pragma once
// Evicts the L2 cache by reading a scratch buffer larger than it (clean lines, so the next kernel
// pays no write-backs, unlike a memset). Used to time kernels as they run in a decode step:
// weights come from device memory, not from a cache warmed by the previous repetition.

#include <cuda_runtime.h>

#include <cstddef>

namespace rtgen::kernels {

// Reads `bytes` (a multiple of 16) of 16-byte aligned `buf` through L2 (bypassing L1). Nothing is
// written (a store to `buf` is guarded by a condition the data never meets, so the reads are kept).
cudaError_t L2FlushRead(const void* buf, size_t bytes, cudaStream_t stream);

}  // namespace rtgen::kernels
