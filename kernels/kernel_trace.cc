#include "kernels/kernel_trace.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/kernel_trace_binder.h"

#ifndef RTGEN_KERNEL_TRACE
#define RTGEN_KERNEL_TRACE 0
#endif

namespace rtgen::kernels {
namespace {

constexpr unsigned long long kCapacity = 1ull << 21;  // records (112 MiB)
static_assert(sizeof(KernelTraceRecord) == 56);

std::vector<cudaError_t (*)(KernelTraceBuffer*)>& Binders() {
  static auto* binders = new std::vector<cudaError_t (*)(KernelTraceBuffer*)>();
  return *binders;
}

struct TraceMemory {
  KernelTraceBuffer* header = nullptr;  // device
  KernelTraceRecord* records = nullptr;  // device, kCapacity
};

TraceMemory& Memory() {
  static TraceMemory memory;
  return memory;
}

// Points every traced translation unit's buffer pointer at `buffer` (null: recording off).
absl::Status BindAll(KernelTraceBuffer* buffer) {
  for (auto* bind : Binders()) {
    RTGEN_CUDA_RETURN_IF_ERROR(bind(buffer));
  }
  return absl::OkStatus();
}

}  // namespace

bool RegisterKernelTraceBinder(cudaError_t (*bind)(KernelTraceBuffer* buffer)) {
  Binders().push_back(bind);
  return true;
}

bool KernelTraceCompiledIn() { return RTGEN_KERNEL_TRACE != 0; }

absl::Status KernelTraceBegin() {
  if (!KernelTraceCompiledIn()) {
    return absl::FailedPreconditionError(
        "the kernel trace is not compiled in: configure with -DRTGEN_KERNEL_TRACE=ON");
  }
  TraceMemory& m = Memory();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // nothing earlier lands in the buffer
  // Records first, then the header: the header is set last, so a records buffer whose header
  // failed is reused by the next call, not allocated again (it leaked).
  if (m.records == nullptr) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&m.records, kCapacity * sizeof(KernelTraceRecord)));
  }
  if (m.header == nullptr) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMalloc(&m.header, sizeof(KernelTraceBuffer)));
  }
  const KernelTraceBuffer header{0, kCapacity, m.records};
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(m.header, &header, sizeof(header), cudaMemcpyHostToDevice));
  RETURN_IF_ERROR(BindAll(m.header));
  // The copies above run on the legacy stream, which the backend's non-blocking streams do not
  // wait for: finish them before any traced launch.
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KernelSpan>> KernelTraceEnd() {
  TraceMemory& m = Memory();
  if (!KernelTraceCompiledIn() || m.header == nullptr) {
    return absl::FailedPreconditionError("no kernel trace is on (KernelTraceBegin)");
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  RETURN_IF_ERROR(BindAll(nullptr));  // later kernels record nothing
  RTGEN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KernelTraceBuffer header{};
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(&header, m.header, sizeof(header), cudaMemcpyDeviceToHost));
  if (header.count > header.capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the kernel trace overflowed: ", header.count, " records for ",
                     header.capacity));
  }
  std::vector<KernelTraceRecord> records(header.count);
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(records.data(), m.records,
                                        records.size() * sizeof(KernelTraceRecord),
                                        cudaMemcpyDeviceToHost));
  return SpansFromRecords(records);
}

}  // namespace rtgen::kernels
