#include "kernels/step_buffers.h"

#include <utility>

#include "engine/common/status_macros.h"

namespace rtgen {
namespace {

constexpr size_t kAlign = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

// Lays the arrays out from `base` (aligned, in a fixed order); *bytes gets the total size.
StepArrays StepBuffers::Carve(char* base, const StepCapacity& c, size_t* bytes) {
  size_t at = 0;
  auto take = [&at, base](size_t n) {
    char* p = base ? base + at : nullptr;
    at += AlignUp(n);
    return p;
  };
  const size_t tokens = static_cast<size_t>(c.max_tokens) * sizeof(int32_t);
  const size_t seqs = static_cast<size_t>(c.max_seqs) * sizeof(int32_t);
  StepArrays a;
  a.token_ids = reinterpret_cast<int32_t*>(take(tokens));
  a.positions = reinterpret_cast<int32_t*>(take(tokens));
  a.slot_mapping = reinterpret_cast<int32_t*>(take(tokens));
  a.token_seq = reinterpret_cast<int32_t*>(take(tokens));
  a.context_lens = reinterpret_cast<int32_t*>(take(seqs));
  a.block_tables = reinterpret_cast<int32_t*>(take(seqs * c.max_blocks_per_seq));
  a.sample_rows = reinterpret_cast<int32_t*>(take(seqs));
  a.sample_params = reinterpret_cast<kernels::SampleRowParams*>(
      take(static_cast<size_t>(c.max_seqs) * sizeof(kernels::SampleRowParams)));
  a.out_tokens = reinterpret_cast<int32_t*>(take(seqs));
  a.out_logprobs = reinterpret_cast<float*>(take(static_cast<size_t>(c.max_seqs) * sizeof(float)));
  *bytes = at;
  return a;
}

absl::StatusOr<StepBuffers> StepBuffers::Create(const StepCapacity& capacity) {
  StepBuffers b;
  b.capacity_ = capacity;
  size_t bytes = 0;
  Carve(nullptr, capacity, &bytes);
  ASSIGN_OR_RETURN(b.device_memory_, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(b.host_memory_, PinnedBuffer::Allocate(bytes));
  b.device_ = Carve(b.device_memory_.as<char>(), capacity, &bytes);
  b.host_ = Carve(b.host_memory_.as<char>(), capacity, &bytes);
  return b;
}

absl::Status StepBuffers::Upload(int32_t num_tokens, int32_t num_seqs, int32_t num_samples,
                                 int32_t block_cols, cudaStream_t stream) const {
  auto copy = [stream](void* dst, const void* src, size_t bytes) -> absl::Status {
    if (bytes == 0) return absl::OkStatus();
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  };
  const size_t t = static_cast<size_t>(num_tokens) * sizeof(int32_t);
  const size_t s = static_cast<size_t>(num_seqs) * sizeof(int32_t);
  const size_t r = static_cast<size_t>(num_samples);
  RETURN_IF_ERROR(copy(device_.token_ids, host_.token_ids, t));
  RETURN_IF_ERROR(copy(device_.positions, host_.positions, t));
  RETURN_IF_ERROR(copy(device_.slot_mapping, host_.slot_mapping, t));
  RETURN_IF_ERROR(copy(device_.token_seq, host_.token_seq, t));
  RETURN_IF_ERROR(copy(device_.context_lens, host_.context_lens, s));
  if (num_seqs > 0 && block_cols > 0) {
    const size_t pitch = static_cast<size_t>(capacity_.max_blocks_per_seq) * sizeof(int32_t);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(device_.block_tables, pitch, host_.block_tables,
                                                 pitch, block_cols * sizeof(int32_t), num_seqs,
                                                 cudaMemcpyHostToDevice, stream));
  }
  RETURN_IF_ERROR(copy(device_.sample_rows, host_.sample_rows, r * sizeof(int32_t)));
  RETURN_IF_ERROR(
      copy(device_.sample_params, host_.sample_params, r * sizeof(kernels::SampleRowParams)));
  return absl::OkStatus();
}

absl::Status StepBuffers::Download(int32_t num_samples, cudaStream_t stream) const {
  const size_t r = static_cast<size_t>(num_samples);
  if (r == 0) return absl::OkStatus();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_.out_tokens, device_.out_tokens,
                                             r * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_.out_logprobs, device_.out_logprobs,
                                             r * sizeof(float), cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

}  // namespace rtgen
