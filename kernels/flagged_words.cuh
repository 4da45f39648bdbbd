#pragma once
// Flagged words: how the blocks of one persistent launch hand data to each other without a
// grid barrier. A word is 64 bits: 32 bits of data (one fp32 or two bf16) and a 32-bit flag
// naming the launch that wrote it. Both halves are stored and loaded as one aligned 64-bit
// access (single-copy atomic), so a reader that sees its launch's flag also sees the data: no
// fence, no separate ready counter. Loads and stores are relaxed at GPU scope, so they go to
// L2 (L1 is not coherent between SMs). Device code only.

#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>

#include "kernels/device_utils.cuh"

namespace rtgen::kernels {

__device__ __forceinline__ uint64_t LoadWord(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreWord(uint64_t* p, uint32_t data, uint32_t flag) {
  const uint64_t v = (uint64_t{flag} << 32) | data;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint32_t PackBf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t{__bfloat16_as_ushort(lo)} | (uint32_t{__bfloat16_as_ushort(hi)} << 16);
}

// A wait longer than this (a writer is missing) traps — the launch fails with an error —
// instead of hanging the device. Checked every 1024 polls.
constexpr uint64_t kMaxWaitNs = 2'000'000'000;

// Counts polls; every 1024th checks the clock and reports whether the wait has run too long.
struct WaitBudget {
  uint32_t polls = 0;
  uint64_t start = 0;
  __device__ __forceinline__ bool Exhausted() {
    if ((++polls & 1023u) != 0) return false;
    const uint64_t now = GlobalTimerNs();
    if (start == 0) start = now;
    return now - start > kMaxWaitNs;
  }
};

__device__ __noinline__ void WordNeverFlagged(const uint64_t* word, uint32_t flag) {
  printf("flagged word %p never carried flag %u (block %d thread %d)\n",
         static_cast<const void*>(word), flag, blockIdx.x, threadIdx.x);
  __trap();
}

// Word `i` of `words` once it carries `flag` (spins until then).
__device__ __forceinline__ uint32_t AwaitWord(const uint64_t* words, int i, uint32_t flag) {
  uint64_t v;
  WaitBudget budget;
  do {
    v = LoadWord(words + i);
    if (budget.Exhausted()) WordNeverFlagged(words + i, flag);
  } while (static_cast<uint32_t>(v >> 32) != flag);
  return static_cast<uint32_t>(v);
}

// Words [0, n) spread over the block's threads, up to eight per thread: all are loaded, then
// every word not yet flagged is loaded again, together, until all carry `flag` (so a thread
// waits about one round trip after its last word lands, not one per word); then take(i, data).
template <int kThreads, typename Take>
__device__ __forceinline__ void AwaitWords(const uint64_t* words, int n, uint32_t flag,
                                           Take take) {
  constexpr int kPer = 8;
  for (int base = threadIdx.x; base < n; base += kPer * kThreads) {
    uint64_t v[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = base + u * kThreads;
      v[u] = i < n ? LoadWord(words + i) : uint64_t{flag} << 32;
    }
    WaitBudget budget;
    for (;;) {
      bool pending = false;
#pragma unroll
      for (int u = 0; u < kPer; ++u) pending |= static_cast<uint32_t>(v[u] >> 32) != flag;
      if (!pending) break;
      if (budget.Exhausted()) {
        int missing = base;
#pragma unroll
        for (int u = kPer - 1; u >= 0; --u) {
          if (static_cast<uint32_t>(v[u] >> 32) != flag) missing = base + u * kThreads;
        }
        WordNeverFlagged(words + missing, flag);
      }
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int i = base + u * kThreads;
        if (static_cast<uint32_t>(v[u] >> 32) != flag) v[u] = LoadWord(words + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = base + u * kThreads;
      if (i < n) take(i, static_cast<uint32_t>(v[u]));
    }
  }
}

}  // namespace rtgen::kernels
