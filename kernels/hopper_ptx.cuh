#pragma once
// Hopper (sm_90a) primitives for kernels that stream operands with the TMA into shared memory
// and multiply them with wgmma: mbarriers, the 2D tensor copy, wgmma's shared-memory descriptor
// and its m64n128k16 bf16 multiply-accumulate. Device code only; the wgmma and TMA helpers are
// compiled for sm_90a alone (callers guard with RTGEN_HOPPER_DEVICE_CODE).

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define RTGEN_HOPPER_DEVICE_CODE 1
#else
#define RTGEN_HOPPER_DEVICE_CODE 0
#endif

namespace rtgen::kernels::hopper {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if RTGEN_HOPPER_DEVICE_CODE

// An mbarrier expecting `count` arrivals per phase.
__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count));
}

// Makes the initialised barriers visible to the async (TMA) proxy and the other threads.
__device__ __forceinline__ void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of TMA transactions the phase must wait for.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddr(bar)) : "memory");
}

// Whether the phase of parity `parity` has completed (waits a short, hardware-chosen time).
__device__ __forceinline__ bool MbarTryWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(SmemAddr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// As MbarTryWait without waiting: never suspends the thread (a suspended waiter caps the rate of
// a one-thread copy loop that waits on every copy; rtgen-sm-stream-bench).
__device__ __forceinline__ bool MbarTestWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(SmemAddr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Spins until the phase of parity `parity` has completed.
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  while (!MbarTryWait(bar, parity)) {
  }
}

__device__ __forceinline__ void PrefetchTensorMap(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// The box of a 2D tensor map at element coordinates (x inner, y outer) into shared memory at
// `dst`; completion is counted on `bar` in bytes. `map` is a __grid_constant__ kernel parameter;
// `policy` an L2 cache policy (device_utils.cuh EvictFirstPolicy).
__device__ __forceinline__ void TmaLoad2d(void* dst, const void* map, int32_t x, int32_t y,
                                          uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(SmemAddr(bar)), "l"(policy)
      : "memory");
}

// A contiguous copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
// to shared memory, counted on `bar` in bytes; `policy` an L2 cache policy.
__device__ __forceinline__ void BulkLoad(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                         uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(SmemAddr(bar)), "l"(policy)
      : "memory");
}

// Orders this thread's earlier ordinary accesses to shared memory before later TMA writes to
// it (a buffer read by the block, then refilled by the TMA).
__device__ __forceinline__ void FenceProxyAsyncShared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// As TmaLoad2d, without a cache hint.
__device__ __forceinline__ void TmaLoad2dNoHint(void* dst, const void* map, int32_t x, int32_t y,
                                                uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(SmemAddr(bar))
      : "memory");
}

// wgmma descriptor of a K-major operand tile whose rows are 128 bytes (64 bf16) written by the
// TMA with 128-byte swizzling: rows in groups of 8 (1024 bytes apart), the tile 1024-byte aligned.
// Adding 2 to the descriptor advances it by 16 bf16 along k (32 bytes, one k16 step).
__device__ __forceinline__ uint64_t SmemDescSwizzle128(const void* tile) {
  uint64_t desc = (SmemAddr(tile) & 0x3ffff) >> 4;  // start address, 16-byte units
  desc |= uint64_t{1} << 16;                        // leading offset: unused for this layout
  desc |= uint64_t{1024 >> 4} << 32;                // stride between 8-row groups
  desc |= uint64_t{1} << 62;                        // 128-byte swizzle
  return desc;
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most one committed group is still running.
__device__ __forceinline__ void WgmmaWaitPrevious() {
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
__device__ __forceinline__ void WgmmaWaitAll() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Ties the accumulator registers to this point: ordinary code reading them after a wait cannot be
// moved above it (the wait itself names no registers).
__device__ __forceinline__ void WgmmaFenceOperands(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[64 x 128] (+)= a[64 x 16] * b[128 x 16]^T, both operands K-major bf16 in shared memory, fp32
// accumulators; accumulate = 0 overwrites d. One warpgroup; thread t holds, for j = 0..15, rows
// 16 (t / 32) + (t % 32) / 4 (+ 8 for d[4j + 2..3]) and columns 8 j + 2 (t % 4) + {0, 1}.
__device__ __forceinline__ void WgmmaM64N128K16(float (&d)[64], uint64_t a_desc, uint64_t b_desc,
                                                int accumulate) {
#define RTGEN_ACC8(i)                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n\t}"
      : RTGEN_ACC8(0), RTGEN_ACC8(8), RTGEN_ACC8(16), RTGEN_ACC8(24), RTGEN_ACC8(32),
        RTGEN_ACC8(40), RTGEN_ACC8(48), RTGEN_ACC8(56)
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#undef RTGEN_ACC8
}

#endif  // RTGEN_HOPPER_DEVICE_CODE

}  // namespace rtgen::kernels::hopper
