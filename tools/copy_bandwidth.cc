#include "tools/copy_bandwidth.h"

#include <cuda_runtime.h>

#include <vector>

#include "absl/status/status.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/random_fill.h"
#include "tools/median.h"

namespace rtgen::tools {

absl::StatusOr<double> MeasureCopyBandwidth() {
  const size_t bytes = size_t{1} << 30;
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  RTGEN_CUDA_RETURN_IF_ERROR(
      kernels::RandomFillF32(src.as<float>(), bytes / sizeof(float), {7, 0, 0.0f, 1.0f}, nullptr));
  cudaEvent_t a, b;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&a));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b));
  std::vector<double> rates;
  absl::Status status;
  for (int i = 0; i < 12 && status.ok(); ++i) {
    float ms = 0.0f;
    const cudaError_t err = [&] {
      cudaError_t e = cudaEventRecord(a, nullptr);
      if (e == cudaSuccess) e = cudaMemcpyAsync(dst.get(), src.get(), bytes,
                                                cudaMemcpyDeviceToDevice, nullptr);
      if (e == cudaSuccess) e = cudaEventRecord(b, nullptr);
      if (e == cudaSuccess) e = cudaEventSynchronize(b);
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
      return e;
    }();
    if (err != cudaSuccess) {
      status = cuda_internal::CudaError(err, "device-to-device copy", __FILE__, __LINE__);
    } else if (i >= 2) {
      rates.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3));
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  RETURN_IF_ERROR(status);
  return Median(rates);
}

}  // namespace rtgen::tools
