#pragma once
// Fixed device buffers for everything a step reads that changes per step (token ids, positions,
// slot mapping, block tables, context lengths, which rows need logits, sampling parameters, a
// mixed step's decode rows) and the sampled tokens it writes back. The host fills a pinned
// mirror with the same layout, then Upload() copies it on the stream.
//
// A step's arrays are laid out compactly from the start of each allocation for its own row
// counts (host / device(tokens, seqs)), inputs first, so the upload is one copy (two when the
// block tables are wide) and the download one: a batch-1 decode step made ten small copies
// before (session 8).
// The same (tokens, seqs) always gives the same addresses, which is what a graph captured for
// a batch bucket reads on every replay.
//
// The pinned mirror has kHostSlots copies: with pipelined steps the host fills the next step's
// inputs while the previous step's upload may not have run yet and its sampled tokens have not
// been read yet; consecutive steps use different slots. The device side has one copy (steps run
// in stream order).
//
// Staged steps (the default; RTGEN_STEP_COPIES=memcpy turns them off): a decode graph holds its
// own copies, as kernels that read and write the pinned mirror (StageIn, StageOut;
// step_copy.h), instead of copy-engine copies before and after each replay (~15 µs a step at
// batch 1, session 73). A graph is captured with host slot 0's addresses; RetargetGraphCopies
// moves its copies to another slot's before that slot's instantiation.

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"
#include "kernels/sampling.h"
#include "kernels/step_arrays.h"

namespace rtgen {

class StepBuffers {
 public:
  static absl::StatusOr<StepBuffers> Create(const StepCapacity& capacity);

  const StepCapacity& capacity() const { return capacity_; }
  // The arrays of a step with `tokens` token rows and `seqs` sequences or sampled rows
  // (1 <= tokens <= max_tokens, 1 <= seqs <= max_seqs; checked by the caller).
  StepArrays device(int32_t tokens, int32_t seqs) const;
  // Pinned, in host slot `slot` (0..kHostSlots-1); fill before Upload.
  StepArrays host(int32_t tokens, int32_t seqs, int32_t slot = 0) const;

  // Copies every input array of the (tokens, seqs) layout, and of the block tables the first
  // block_cols columns (kernels never read a column past a sequence's last block, so the rest
  // may hold an earlier step's values). One copy while the tables are narrow or full width,
  // and one more for the first `penalty_entries` penalty entries when there are any.
  absl::Status Upload(int32_t tokens, int32_t seqs, int32_t block_cols, cudaStream_t stream,
                      int32_t slot = 0, int32_t penalty_entries = 0) const;
  // Copies the sampled tokens and logprobs of the (tokens, seqs) layout into host slot `slot`,
  // and the rows' top-n logprobs (out_top) with `top` (one copy either way).
  absl::Status Download(int32_t tokens, int32_t seqs, cudaStream_t stream, int32_t slot = 0,
                        bool top = false) const;

  // Staged copies of a (tokens, seqs) layout, made by kernels on `stream` from or into host slot
  // `slot`: StageIn copies every input array (block tables whole; Stages says where that is
  // cheap), a plain launch; StageOut the sampled tokens, logprobs and top-n entries, a
  // programmatic dependent of the step's last kernel. Penalty entries are not staged
  // (UploadPenalties copies them before the step).
  absl::Status StageIn(int32_t tokens, int32_t seqs, cudaStream_t stream, int32_t slot) const;
  absl::Status StageOut(int32_t tokens, int32_t seqs, cudaStream_t stream, int32_t slot) const;
  absl::Status UploadPenalties(int32_t penalty_entries, cudaStream_t stream, int32_t slot) const;
  // True when a step of `seqs` sequences is staged: at most kMostStagedSeqs of them, and its
  // whole block tables at most kWholeTableBytes (wider ones are copied column by column, by the
  // copy engine).
  bool Stages(int32_t seqs) const;
  // Session 73 (H100, pipelined TPOT): staged SmolLM2 b1 0.400 -> 0.390 ms, b8 0.460 -> 0.447,
  // b16 0.563 -> 0.552, Llama-3.2-1B b8 1.148 -> 1.135. No larger step was ever staged (at
  // 4096-token contexts their tables are over kWholeTableBytes), so none is.
  static constexpr int32_t kMostStagedSeqs = 16;
  // Points every staged copy in `graph` (captured for host slot 0, or retargeted since) at host
  // slot `slot`'s arrays; *found gets how many it changed.
  absl::Status RetargetGraphCopies(cudaGraph_t graph, int32_t slot, int32_t* found) const;
  // Decode graphs stage their copies: unless RTGEN_STEP_COPIES=memcpy (read once per process).
  static bool GraphCopies();

  static constexpr int32_t kHostSlots = 2;

  // Bytes of block tables below which Upload copies every column (one copy, no 2D copy).
  static constexpr size_t kWholeTableBytes = size_t{16} << 10;

 private:
  static StepArrays Carve(char* base, const StepCapacity& c, size_t* bytes);

  // The device's address of byte `offset` of host slot `slot` of the pinned mirror.
  void* HostOnDevice(int32_t slot, size_t offset) const;
  // Bytes of `seqs` sequences' whole block tables.
  size_t TableBytes(int32_t seqs) const;
  // An error naming penalty_entries when it is outside [0, max_penalty_entries].
  absl::Status CheckPenaltyEntries(int32_t penalty_entries) const;

  StepCapacity capacity_;
  size_t slot_bytes_ = 0;  // one layout of the full capacity
  char* host_on_device_ = nullptr;  // the pinned mirror (every slot) in the device's addresses
  DeviceBuffer device_memory_;
  PinnedBuffer host_memory_;
  DeviceBuffer device_penalties_;  // [max_penalty_entries]
  PinnedBuffer host_penalties_;    // [kHostSlots * max_penalty_entries]
};

}  // namespace rtgen
