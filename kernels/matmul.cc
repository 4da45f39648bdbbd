#include "kernels/cuda_check.h"
#include "kernels/gemv.h"
#include "kernels/matmul.h"

namespace rtgen::kernels {

absl::StatusOr<std::unique_ptr<MatmulContext>> MatmulContext::Create(bool use_gemv) {
  std::unique_ptr<MatmulContext> ctx(new MatmulContext());
  ctx->use_gemv_ = use_gemv;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&ctx->handle_));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&ctx->workspace_, kWorkspaceBytes));
  return ctx;
}

MatmulContext::~MatmulContext() {
  // Destructors cannot report errors; the calls below only release resources.
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

// Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = (w^T)^T[n,k] x^T[k,m]:
// A = w seen column-major as [k, n] (transposed), B = x seen column-major as [k, m].
absl::StatusOr<const MatmulContext::Plan*> MatmulContext::GetPlan(int32_t m, int32_t n,
                                                                  int32_t k, bool y_f32) {
  const auto key = std::make_tuple(m, n, k, y_f32);
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  Plan plan;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, k, n, k));
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, k, m, k));
  RTGEN_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan.c, y_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));

  cublasLtMatmulPreference_t pref = nullptr;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                        1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  RTGEN_CUBLAS_RETURN_IF_ERROR(st);
  if (found == 0) {
    return absl::InternalError(absl::StrCat("cuBLASLt has no bf16 algorithm for m=", m, " n=", n,
                                            " k=", k));
  }
  plan.algo = result.algo;
  return &plans_.emplace(key, plan).first->second;
}

absl::Status Matmul(MatmulContext& ctx, MatmulParams p, cudaStream_t stream) {
  if (p.m <= 0) return absl::OkStatus();
  // The GEMV for small batches, except where cuBLASLt measured faster on the H200
  // (rtgen-gemv-bench, docs/perf/gpu_notes.md): many output features (n > 16384: LM heads,
  // Llama-3-8B's gate+up; there cuBLASLt streams at 4.1-4.2 TB/s against the GEMV's 3.9-4.1)
  // and 9..16 rows of a weight over 4 Mi elements.
  const bool gemv_shape = p.m <= 8 ? p.n <= 16384
                                   : int64_t{p.n} * p.k <= (int64_t{4} << 20);
  if (ctx.use_gemv_ && gemv_shape) {
    GemvParams g{p.x, p.w, p.y, p.y_f32, p.m, p.n, p.k};
    if (GemvSupported(g)) {
      RTGEN_CUDA_RETURN_IF_ERROR(Gemv(g, stream));
      return absl::OkStatus();
    }
  }
  const auto plan_or = ctx.GetPlan(p.m, p.n, p.k, p.y_f32);
  if (!plan_or.ok()) return plan_or.status();
  const MatmulContext::Plan& plan = **plan_or;
  const float alpha = 1.0f, beta = 0.0f;
  RTGEN_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(ctx.handle_, plan.desc, &alpha, p.w, plan.a, p.x,
                                              plan.b, &beta, p.y, plan.c, p.y, plan.c, &plan.algo,
                                              ctx.workspace_, MatmulContext::kWorkspaceBytes,
                                              stream));
  return absl::OkStatus();
}

}  // namespace rtgen::kernels
