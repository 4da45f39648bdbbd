// main() of gpu_tests: skips (exit 77, which ctest reports as SKIPPED) when no CUDA device is
// visible, so a machine without a GPU never counts these tests as passed. Listing the tests
// (--gtest_list_tests: ctest's discovery, tests/kernels/CMakeLists.txt) needs no device.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "gtest/gtest.h"

namespace {

bool ListsTests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gtest_list_tests") == 0) return true;
  }
  return false;
}

// Prints device 0 and returns true, or says why the tests are skipped and returns false.
bool HasCudaDevice() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no CUDA device: GPU tests skipped (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("CUDA device 0: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!ListsTests(argc, argv) && !HasCudaDevice()) return 77;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
