#pragma once
// Checks for every CUDA runtime and cuBLAS(Lt) call: a failure becomes an absl::Status naming the
// call, the file and the line. Kernel entry points return cudaError_t (the launch's
// cudaGetLastError), so callers wrap them in RTGEN_CUDA_RETURN_IF_ERROR too.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rtgen::cuda_internal {

inline absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", expr, " failed: ",
                                          cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                          ")"));
}

inline absl::Status CublasError(cublasStatus_t st, const char* expr, const char* file, int line) {
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", expr, " failed: cublas status ",
                                          static_cast<int>(st), " (", cublasLtGetStatusString(st),
                                          ")"));
}

}  // namespace rtgen::cuda_internal

#define RTGEN_CUDA_RETURN_IF_ERROR(expr)                                                  \
  do {                                                                                    \
    const cudaError_t _rtgen_cuda_err = (expr);                                           \
    if (_rtgen_cuda_err != cudaSuccess) {                                                 \
      return ::rtgen::cuda_internal::CudaError(_rtgen_cuda_err, #expr, __FILE__, __LINE__); \
    }                                                                                     \
  } while (0)

#define RTGEN_CUBLAS_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                        \
    const cublasStatus_t _rtgen_cublas_st = (expr);                                           \
    if (_rtgen_cublas_st != CUBLAS_STATUS_SUCCESS) {                                          \
      return ::rtgen::cuda_internal::CublasError(_rtgen_cublas_st, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)
