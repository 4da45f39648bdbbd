#pragma once
// Scalar conversions between fp32 and fp16/bf16, and the ggml block formats rtgen reads.
//
// Block layouts (little-endian, as ggml writes them; 32 elements per block):
//   Q8_0: fp16 d, int8 q[32]                 value = q * d                    (34 bytes)
//   Q4_0: fp16 d, uint8 qs[16]               value = (nibble - 8) * d         (18 bytes)
//   Q4_1: fp16 d, fp16 m, uint8 qs[16]       value = nibble * d + m           (20 bytes)
// In the Q4 formats byte j holds element j in its low nibble and element j + 16 in its high one.

#include <cstddef>
#include <cstdint>

namespace rtgen {

inline constexpr int kGgmlBlockSize = 32;  // elements per quantised block
inline constexpr size_t kQ8_0BlockBytes = 2 + 32;
inline constexpr size_t kQ4_0BlockBytes = 2 + 16;
inline constexpr size_t kQ4_1BlockBytes = 2 + 2 + 16;

// Exact fp16 -> fp32 (subnormals, infinities and NaNs included).
float Fp16ToFp32(uint16_t h);
// fp32 -> fp16, round to nearest even; overflow gives infinity, NaN stays NaN.
uint16_t Fp32ToFp16(float f);
// bf16 is the top half of an fp32.
float Bf16ToFp32(uint16_t h);
// fp32 -> bf16, round to nearest even; NaN stays NaN.
uint16_t Fp32ToBf16(float f);

// Reads a little-endian fp16 from unaligned memory.
float LoadFp16(const uint8_t* p);

// Dequantise `n_blocks` consecutive blocks from `src` into `dst` (n_blocks * 32 floats).
void DequantizeQ8_0(const uint8_t* src, int64_t n_blocks, float* dst);
void DequantizeQ4_0(const uint8_t* src, int64_t n_blocks, float* dst);
void DequantizeQ4_1(const uint8_t* src, int64_t n_blocks, float* dst);

}  // namespace rtgen
