#pragma once
// The wide cuBLASLt search (RTGEN_MATMUL_TUNE=wide; matmul.h): more configurations of the
// heuristic's algorithms than its list names. For each given algorithm id, each tile and stages
// id its capabilities list, four thread-block cluster shapes (automatic, 1x1, 2x1, 1x2), split-K
// 1 / 2 / 4 (its first reduction scheme) and CTA swizzling where offered;
// cublasLtMatmulAlgoCheck decides which run within the workspace. Host code; nothing is launched.

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rtgen::kernels {

// The reduction scheme a split-K configuration of an algorithm takes: the first of compute type,
// output type and in place that its capability mask (CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK)
// offers, 0 when none.
uint32_t FirstReductionScheme(uint32_t mask);

// Whether cuBLASLt runs `algo` for desc / a / b / c (C = D) within workspace_bytes
// (cublasLtMatmulAlgoCheck).
bool AlgoFits(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, const cublasLtMatmulAlgo_t& algo,
              size_t workspace_bytes);

// Up to max_count configurations of `algo_ids` for D = op(A) op(B) with bf16 A and B, fp32
// compute and scale, C and D of c_type (C = D), each checked against desc / a / b / c and using
// at most workspace_bytes. Order: algorithm id as given, tile, stages, cluster, split, swizzle.
std::vector<cublasLtMatmulAlgo_t> EnumerateMatmulAlgos(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cudaDataType_t c_type,
    const std::vector<int>& algo_ids, size_t workspace_bytes, size_t max_count);

}  // namespace rtgen::kernels
