#pragma once
// Fixed device buffers for everything a step reads that changes per step (token ids, positions,
// slot mapping, block tables, context lengths, which rows need logits, sampling parameters)
// and the sampled tokens it writes back. Addresses never change, so captured CUDA graphs read
// them; the host fills a pinned mirror with the same layout, then Upload() copies the used
// parts on the stream.

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"
#include "kernels/sampling.h"

namespace rtgen {

struct StepCapacity {
  int32_t max_tokens = 0;          // tokens per step
  int32_t max_seqs = 0;            // sequences (and sampled rows) per step
  int32_t max_blocks_per_seq = 0;  // block table width
};

// Pointers into one allocation (device or pinned host), laid out identically in both.
struct StepArrays {
  int32_t* token_ids = nullptr;       // [max_tokens]
  int32_t* positions = nullptr;       // [max_tokens]
  int32_t* slot_mapping = nullptr;    // [max_tokens]
  int32_t* token_seq = nullptr;       // [max_tokens] sequence of each token
  int32_t* context_lens = nullptr;    // [max_seqs]
  int32_t* block_tables = nullptr;    // [max_seqs, max_blocks_per_seq], -1 padded
  int32_t* sample_rows = nullptr;     // [max_seqs] token row whose logits are computed
  kernels::SampleRowParams* sample_params = nullptr;  // [max_seqs]
  int32_t* out_tokens = nullptr;      // [max_seqs] sampled token per logits row
  float* out_logprobs = nullptr;      // [max_seqs]
};

class StepBuffers {
 public:
  static absl::StatusOr<StepBuffers> Create(const StepCapacity& capacity);

  const StepCapacity& capacity() const { return capacity_; }
  const StepArrays& device() const { return device_; }
  const StepArrays& host() const { return host_; }  // pinned; fill before Upload

  // Copies the first num_tokens / num_seqs / num_samples entries of each input array, and the
  // first block_cols columns of the first num_seqs block-table rows (kernels never read a
  // column past a sequence's last block, so the rest may hold an earlier step's values).
  absl::Status Upload(int32_t num_tokens, int32_t num_seqs, int32_t num_samples,
                      int32_t block_cols, cudaStream_t stream) const;
  // Copies the sampled tokens and logprobs of the first num_samples rows into host().
  absl::Status Download(int32_t num_samples, cudaStream_t stream) const;

 private:
  static StepArrays Carve(char* base, const StepCapacity& c, size_t* bytes);

  StepCapacity capacity_;
  DeviceBuffer device_memory_;
  PinnedBuffer host_memory_;
  StepArrays device_;
  StepArrays host_;
};

}  // namespace rtgen
