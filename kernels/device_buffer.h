#pragma once
// Owning handles for device memory (cudaMalloc) and pinned host memory (cudaMallocHost).

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/alloc_log.h"
#include "kernels/cuda_check.h"

namespace rtgen {

template <bool kPinnedHost>
class CudaMemory {
 public:
  CudaMemory() = default;
  ~CudaMemory() { Reset(); }
  CudaMemory(CudaMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  static absl::StatusOr<CudaMemory> Allocate(size_t bytes) {
    CudaMemory m;
    if (bytes == 0) return m;
    if constexpr (kPinnedHost) {
      RTGEN_CUDA_RETURN_IF_ERROR(cudaMallocHost(&m.ptr_, bytes));
    } else {
      RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&m.ptr_, bytes));
    }
    m.bytes_ = bytes;
    kernels::LogAllocation(kPinnedHost ? "pinned" : "device", bytes, m.ptr_);
    return m;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void Reset() {
    // Frees cannot report errors from a destructor; a failure here means the context is gone.
    if (ptr_ == nullptr) return;
    if constexpr (kPinnedHost) {
      cudaFreeHost(ptr_);
    } else {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<false>;
using PinnedBuffer = CudaMemory<true>;

}  // namespace rtgen
