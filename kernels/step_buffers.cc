#include "kernels/step_buffers.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/env_switch.h"
#include "kernels/step_copy.h"

namespace rtgen {
namespace {

constexpr size_t kAlign = 128;  // every array starts on its own cache line

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T>
const char* Bytes(const T* p) {
  return reinterpret_cast<const char*>(p);
}

}  // namespace

// Lays the arrays of a step with c.max_tokens tokens and c.max_seqs sequences out from `base`
// (aligned, in a fixed order: inputs, block tables last among them, then outputs); *bytes gets
// the total size. A smaller step's layout fits inside a larger one's.
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
  a.attention_positions = reinterpret_cast<int32_t*>(take(tokens));
  a.context_lens = reinterpret_cast<int32_t*>(take(seqs));
  a.decode_context_lens = reinterpret_cast<int32_t*>(take(seqs));
  a.sample_rows = reinterpret_cast<int32_t*>(take(seqs));
  a.sample_params = reinterpret_cast<kernels::SampleRowParams*>(
      take(static_cast<size_t>(c.max_seqs) * sizeof(kernels::SampleRowParams)));
  a.block_tables = reinterpret_cast<int32_t*>(take(seqs * c.max_blocks_per_seq));
  // The outputs side by side, for one contiguous download.
  char* out = take(seqs + static_cast<size_t>(c.max_seqs) * sizeof(float) +
                   static_cast<size_t>(c.max_seqs) * kernels::kMaxTopLogprobs *
                       sizeof(kernels::SampleTopEntry));
  a.out_tokens = reinterpret_cast<int32_t*>(out);
  a.out_logprobs = reinterpret_cast<float*>(out ? out + seqs : nullptr);
  a.out_top = reinterpret_cast<kernels::SampleTopEntry*>(out ? out + 2 * seqs : nullptr);
  *bytes = at;
  return a;
}

absl::StatusOr<StepBuffers> StepBuffers::Create(const StepCapacity& capacity) {
  StepBuffers b;
  b.capacity_ = capacity;
  size_t bytes = 0;
  Carve(nullptr, capacity, &bytes);
  b.slot_bytes_ = bytes;
  ASSIGN_OR_RETURN(b.device_memory_, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(b.host_memory_, PinnedBuffer::Allocate(bytes * kHostSlots));
  void* mapped = nullptr;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&mapped, b.host_memory_.get(), 0));
  b.host_on_device_ = static_cast<char*>(mapped);
  if (capacity.max_penalty_entries > 0) {
    const size_t entries =
        static_cast<size_t>(capacity.max_penalty_entries) * sizeof(kernels::SamplePenaltyEntry);
    ASSIGN_OR_RETURN(b.device_penalties_, DeviceBuffer::Allocate(entries));
    ASSIGN_OR_RETURN(b.host_penalties_, PinnedBuffer::Allocate(entries * kHostSlots));
  }
  return b;
}

StepArrays StepBuffers::device(int32_t tokens, int32_t seqs) const {
  size_t bytes = 0;
  StepArrays a =
      Carve(device_memory_.as<char>(), {tokens, seqs, capacity_.max_blocks_per_seq}, &bytes);
  if (capacity_.max_penalty_entries > 0) {
    a.penalty_entries = device_penalties_.as<kernels::SamplePenaltyEntry>();
  }
  return a;
}

StepArrays StepBuffers::host(int32_t tokens, int32_t seqs, int32_t slot) const {
  size_t bytes = 0;
  StepArrays a = Carve(host_memory_.as<char>() + static_cast<size_t>(slot) * slot_bytes_,
                       {tokens, seqs, capacity_.max_blocks_per_seq}, &bytes);
  if (capacity_.max_penalty_entries > 0) {
    a.penalty_entries = host_penalties_.as<kernels::SamplePenaltyEntry>() +
                        static_cast<size_t>(slot) * capacity_.max_penalty_entries;
  }
  return a;
}

absl::Status StepBuffers::Upload(int32_t tokens, int32_t seqs, int32_t block_cols,
                                 cudaStream_t stream, int32_t slot,
                                 int32_t penalty_entries) const {
  RETURN_IF_ERROR(CheckPenaltyEntries(penalty_entries));
  const StepArrays h = host(tokens, seqs, slot), d = device(tokens, seqs);
  const size_t pitch = static_cast<size_t>(capacity_.max_blocks_per_seq) * sizeof(int32_t);
  const size_t tables = TableBytes(seqs);
  const bool whole = block_cols == capacity_.max_blocks_per_seq || tables <= kWholeTableBytes;
  const size_t head = static_cast<size_t>(Bytes(h.block_tables) - Bytes(h.token_ids));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.token_ids, h.token_ids, head + (whole ? tables : 0),
                                             cudaMemcpyHostToDevice, stream));
  if (!whole && block_cols > 0) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(d.block_tables, pitch, h.block_tables, pitch,
                                                 block_cols * sizeof(int32_t), seqs,
                                                 cudaMemcpyHostToDevice, stream));
  }
  return UploadPenalties(penalty_entries, stream, slot);
}

absl::Status StepBuffers::Download(int32_t tokens, int32_t seqs, cudaStream_t stream,
                                   int32_t slot, bool top) const {
  const StepArrays h = host(tokens, seqs, slot), d = device(tokens, seqs);
  const char* end = top ? Bytes(h.out_top + int64_t{seqs} * kernels::kMaxTopLogprobs)
                        : Bytes(h.out_logprobs + seqs);
  const size_t bytes = static_cast<size_t>(end - Bytes(h.out_tokens));
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(h.out_tokens, d.out_tokens, bytes, cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

void* StepBuffers::HostOnDevice(int32_t slot, size_t offset) const {
  return host_on_device_ + static_cast<size_t>(slot) * slot_bytes_ + offset;
}

bool StepBuffers::GraphCopies() {
  static const bool graph = kernels::EnvChoice("RTGEN_STEP_COPIES", {"memcpy", "graph"}, 1) == 1;
  return graph;
}

size_t StepBuffers::TableBytes(int32_t seqs) const {
  return static_cast<size_t>(seqs) * capacity_.max_blocks_per_seq * sizeof(int32_t);
}

absl::Status StepBuffers::CheckPenaltyEntries(int32_t penalty_entries) const {
  if (penalty_entries < 0 || penalty_entries > capacity_.max_penalty_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("penalty_entries ", penalty_entries, " is outside [0, ",
                     capacity_.max_penalty_entries, "]"));
  }
  return absl::OkStatus();
}

bool StepBuffers::Stages(int32_t seqs) const {
  return seqs <= kMostStagedSeqs && TableBytes(seqs) <= kWholeTableBytes;
}

absl::Status StepBuffers::StageIn(int32_t tokens, int32_t seqs, cudaStream_t stream,
                                  int32_t slot) const {
  const StepArrays h = host(tokens, seqs, slot), d = device(tokens, seqs);
  const size_t bytes =
      static_cast<size_t>(Bytes(h.block_tables) - Bytes(h.token_ids)) + TableBytes(seqs);
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::CopyStepBytes(HostOnDevice(slot, 0), d.token_ids, bytes,
                                                    /*pdl=*/false, stream));
  return absl::OkStatus();
}

absl::Status StepBuffers::StageOut(int32_t tokens, int32_t seqs, cudaStream_t stream,
                                   int32_t slot) const {
  const StepArrays h = host(tokens, seqs, slot), d = device(tokens, seqs);
  const size_t offset = static_cast<size_t>(Bytes(h.out_tokens) - Bytes(h.token_ids));
  const size_t bytes = static_cast<size_t>(
      Bytes(h.out_top + int64_t{seqs} * kernels::kMaxTopLogprobs) - Bytes(h.out_tokens));
  RTGEN_CUDA_RETURN_IF_ERROR(kernels::CopyStepBytes(d.out_tokens, HostOnDevice(slot, offset),
                                                    bytes, /*pdl=*/true, stream));
  return absl::OkStatus();
}

absl::Status StepBuffers::UploadPenalties(int32_t penalty_entries, cudaStream_t stream,
                                          int32_t slot) const {
  RETURN_IF_ERROR(CheckPenaltyEntries(penalty_entries));
  if (penalty_entries == 0) return absl::OkStatus();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      device_penalties_.get(),
      host_penalties_.as<kernels::SamplePenaltyEntry>() +
          static_cast<size_t>(slot) * capacity_.max_penalty_entries,
      static_cast<size_t>(penalty_entries) * sizeof(kernels::SamplePenaltyEntry),
      cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

absl::Status StepBuffers::RetargetGraphCopies(cudaGraph_t graph, int32_t slot,
                                              int32_t* found) const {
  *found = 0;
  size_t count = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nodes.data(), &count));
  const char* mirror = host_on_device_;
  const char* mirror_end = mirror + kHostSlots * slot_bytes_;
  // A pointer into the mirror, moved to the same offset of `slot`.
  auto move = [&](const void* p) -> char* {
    const char* c = static_cast<const char*>(p);
    if (c < mirror || c >= mirror_end) return nullptr;
    return static_cast<char*>(HostOnDevice(slot, static_cast<size_t>(c - mirror) % slot_bytes_));
  };
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p = {};
    const cudaError_t got = cudaGraphKernelNodeGetParams(node, &p);
    if (got == cudaErrorInvalidDeviceFunction) {  // a library's kernel (cuBLASLt's): not a copy
      (void)cudaGetLastError();
      continue;
    }
    RTGEN_CUDA_RETURN_IF_ERROR(got);
    kernels::StepCopyArgs a;
    if (!kernels::IsStepCopyNode(p, &a)) continue;
    char* src = move(a.src);
    char* dst = move(a.dst);
    if ((src == nullptr) == (dst == nullptr)) {
      return absl::InternalError("a staged copy in a graph has no one side in the host mirror");
    }
    if (src != nullptr) a.src = src;
    if (dst != nullptr) a.dst = dst;
    void* args[] = {&a.src, &a.dst, &a.units, &a.tail};
    p.kernelParams = args;
    p.extra = nullptr;
    RTGEN_CUDA_RETURN_IF_ERROR(cudaGraphKernelNodeSetParams(node, &p));
    ++*found;
  }
  return absl::OkStatus();
}

}  // namespace rtgen
