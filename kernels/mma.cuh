#pragma once
// Warp-level tensor-core helpers (sm_80+): the bf16 mma.m16n8k16 with fp32 accumulators and the
// ldmatrix loads that feed it from shared memory. Device code only.
//
// Fragment layout (lane = 4 * g + t): A (16 x 16, row-major) a0 = (row g, k 2t..2t+1), a1 = (row
// g+8, same k), a2 = (row g, k 2t+8..2t+9), a3 = (row g+8, same); B (16 x 8, "col") b0 = (k
// 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g); C/D (16 x 8) d0, d1 = (row g, cols 2t, 2t+1),
// d2, d3 = (row g+8, same cols).

#include <cuda_bf16.h>

#include <cstdint>

namespace rtgen::kernels {

// d += A * B.
__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8 x 8 bf16 matrices from shared memory; lanes 8i..8i+7 give the row addresses (16 bytes
// each) of matrix i, and r[i] receives this lane's (row lane / 4, cols 2 (lane % 4) + {0, 1}).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// As LdMatrixX4, each matrix transposed: r[i] = (rows 2 (lane % 4) + {0, 1}, col lane / 4).
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Where element `col` of row `r` lives in a swizzled shared-memory row of bf16: 16-byte chunk
// (col / 8) ^ (r % 8) (rows of 8 or 16 chunks; the XOR keeps a chunk within its row), so
// ldmatrix's eight rows of one 16-byte column fall in eight different bank groups without
// padding.
__device__ __forceinline__ int Swz(int r, int col) {
  return ((((col >> 3) ^ (r & 7))) << 3) | (col & 7);
}

// Two floats as one bf16x2 register (lo in the low half), each rounded to nearest: an A or B
// fragment register.
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace rtgen::kernels
