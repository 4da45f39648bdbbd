#pragma once
// Small fp32 vector kernels of the CPU forward pass (AVX2/FMA where it pays).

#include <cstdint>

namespace rtgen {

// sum a[i] * b[i], i < n.
float Dot(const float* a, const float* b, int64_t n);

// out = x / sqrt(mean(x^2) + eps) * weight, over n values (out may alias x).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace rtgen
