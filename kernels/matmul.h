#pragma once
// Linear layers: y[m, n] = x[m, k] * w[n, k]^T with bf16 operands, fp32 accumulation, bf16 or fp32
// output. cuBLASLt for general shapes; the custom GEMV (gemv.h) for small m when enabled (see
// Matmul for the exact routing).
// The context owns the cuBLASLt handle, a fixed workspace (so calls can be graph-captured) and a
// per-shape cache of the chosen algorithm (so a shape always runs the same algorithm: eager and
// replayed steps give bitwise equal results).

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rtgen::kernels {

struct MatmulParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (HF weight layout)
  void* y = nullptr;                 // [m, n] row-major
  bool y_f32 = false;                // fp32 output (logits) instead of bf16
  int32_t m = 0;
  int32_t n = 0;
  int32_t k = 0;
};

class MatmulContext {
 public:
  static constexpr size_t kWorkspaceBytes = 32u << 20;
  // use_gemv: route small batches (m <= 8, or <= 16 on small weights) to the custom GEMV.
  static absl::StatusOr<std::unique_ptr<MatmulContext>> Create(bool use_gemv);
  ~MatmulContext();
  MatmulContext(const MatmulContext&) = delete;
  MatmulContext& operator=(const MatmulContext&) = delete;

  bool use_gemv() const { return use_gemv_; }

 private:
  friend absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream);
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  MatmulContext() = default;
  absl::StatusOr<const Plan*> GetPlan(int32_t m, int32_t n, int32_t k, bool y_f32);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  bool use_gemv_ = false;
  std::map<std::tuple<int32_t, int32_t, int32_t, bool>, Plan> plans_;
};

absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream);

}  // namespace rtgen::kernels
