#include "kernels/matmul_search.h"

#include <cstdint>

namespace rtgen::kernels {
namespace {

// The ids an array capability lists (tile or stages ids), or {0} (undefined: the algorithm picks)
// where it lists none.
std::vector<uint32_t> CapIds(const cublasLtMatmulAlgo_t& algo,
                             cublasLtMatmulAlgoCapAttributes_t cap) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, cap, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes < sizeof(uint32_t)) {
    return {0};
  }
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, cap, ids.data(), ids.size() * sizeof(uint32_t),
                                        &written) != CUBLAS_STATUS_SUCCESS) {
    return {0};
  }
  ids.resize(written / sizeof(uint32_t));
  if (ids.empty()) ids.push_back(0);
  return ids;
}

template <typename T>
T CapValue(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t cap) {
  T v{};
  size_t written = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, cap, &v, sizeof(v), &written);
  return v;
}

// T must be the attribute's own type (cublasLt.h): the size is checked.
template <typename T>
bool SetConfig(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(algo, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

bool AlgoFits(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, const cublasLtMatmulAlgo_t& algo,
              size_t workspace_bytes) {
  cublasLtMatmulHeuristicResult_t check{};
  return cublasLtMatmulAlgoCheck(handle, desc, a, b, c, c, &algo, &check) ==
             CUBLAS_STATUS_SUCCESS &&
         check.workspaceSize <= workspace_bytes;
}

uint32_t FirstReductionScheme(uint32_t mask) {
  for (const uint32_t s : {static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                           static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE),
                           static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE)}) {
    if ((mask & s) != 0) return s;
  }
  return 0;
}

std::vector<cublasLtMatmulAlgo_t> EnumerateMatmulAlgos(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cudaDataType_t c_type,
    const std::vector<int>& algo_ids, size_t workspace_bytes, size_t max_count) {
  std::vector<cublasLtMatmulAlgo_t> out;
  // Cluster shapes, M x N x 1 (M runs over the weight's rows in matmul.cc's plans).
  const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                               CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
  for (const int id : algo_ids) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                               c_type, c_type, id, &base) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    const std::vector<uint32_t> tiles = CapIds(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    const std::vector<uint32_t> stages = CapIds(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    const bool splitk = CapValue<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t schemes = CapValue<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    const uint32_t swizzle_max =
        CapValue<uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0 ? 1 : 0;
    const uint32_t scheme = FirstReductionScheme(schemes);
    for (const uint32_t tile : tiles) {
      for (const uint32_t stage : stages) {
        for (const uint16_t cluster : clusters) {
          for (const int32_t split : {1, 2, 4}) {
            if (split > 1 && (!splitk || scheme == 0)) break;
            for (uint32_t swizzle = 0; swizzle <= swizzle_max; ++swizzle) {
              if (out.size() >= max_count) return out;
              cublasLtMatmulAlgo_t algo = base;
              const uint32_t reduction = split > 1 ? scheme : 0;
              if (SetConfig(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile) &&
                  SetConfig(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage) &&
                  SetConfig(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster) &&
                  SetConfig(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split) &&
                  SetConfig(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, reduction) &&
                  SetConfig(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swizzle) &&
                  AlgoFits(handle, desc, a, b, c, algo, workspace_bytes)) {
                out.push_back(algo);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace rtgen::kernels
