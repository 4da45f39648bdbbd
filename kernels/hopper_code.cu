#include "kernels/hopper_code.h"

#include <cuda_runtime.h>

#include "kernels/hopper_ptx.cuh"

namespace rtgen::kernels {
namespace {

__global__ void HopperCodeProbeKernel(int* out) { *out = RTGEN_HOPPER_DEVICE_CODE; }

}  // namespace

bool DeviceCodeLoads(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaFuncAttributes attributes = {};
  const bool ok = cudaSetDevice(device) == cudaSuccess &&
                  cudaFuncGetAttributes(&attributes, HopperCodeProbeKernel) == cudaSuccess;
  cudaSetDevice(previous);
  cudaGetLastError();  // no image is an answer (no), not an error to pass on
  return ok;
}

bool HopperDeviceCodeRuns(int device) {
  int previous = 0, has = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  int* flag = nullptr;
  bool ok = cudaSetDevice(device) == cudaSuccess &&
            cudaMalloc(&flag, sizeof(int)) == cudaSuccess &&
            cudaMemset(flag, 0, sizeof(int)) == cudaSuccess;
  if (ok) {
    HopperCodeProbeKernel<<<1, 1>>>(flag);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  if (flag != nullptr) cudaFree(flag);
  cudaSetDevice(previous);
  cudaGetLastError();  // a failed probe is an answer (no), not an error to pass on
  return ok && has == 1;
}

}  // namespace rtgen::kernels
