#pragma once
// Diagnostic for "where the time goes" inside the decode graph (issue 4): RTGEN_DIAG_SKIP names
// parts of the forward step (comma-separated) that every step then leaves out. The step's time
// without a part, against its time with it, is that part's cost in the graph, its kernel
// boundaries included. The step's results are garbage then: for rtgen-engine-bench runs only
// (scripts/device/where_time_goes.sh). The embedding and sampling always run (they write and
// read the token ids the next step embeds).

namespace rtgen::kernels {

enum class StepPart {
  // With linked norms (model_forward.h: every model shape at batch 1) the norms are part of the
  // o and down projections' epilogues: attn_norm then skips only layer 0's launch, ffn_norm
  // nothing; skipping a projection there also leaves the norms' sums unbalanced for later steps
  // (RTGEN_NORM_LINK=0 times the norms as launches). Steps with folded norms
  // (model_forward.h FoldsNorms) launch no layer norm: attn_norm and ffn_norm skip nothing there
  // (RTGEN_NORM_FOLD=0 times them).
  kAttnNorm,   // "attn_norm": the RMSNorm (and residual add) before qkv
  kQkv,        // "qkv": the qkv projection with RoPE and the KV store
  // "attention". Left out, it also leaves the o projection without partitions to merge: o then
  // runs the plain GEMV on a row, not the merging one of the whole step (session 72).
  kAttention,
  kO,          // "o": the output projection
  kFfnNorm,    // "ffn_norm"
  kGateUp,     // "gate_up": gate_up with SiLU·mul
  kDown,       // "down"
  kLmHead,     // "lm_head": the final norm and the LM head
  // Around the graph, not in it (cuda_backend.cc): a decode graph step's host-to-device copy of
  // its step arrays ("upload") or device-to-host copy of its sampled rows ("download"), where
  // these are copies (RTGEN_STEP_COPIES=memcpy, or a bucket step_buffers.h does not stage: a
  // staged graph's copies are nodes of it, which neither part leaves out), once
  // kDiagCopiesKeptReplays steps of its bucket in a row have copied theirs (laying out the
  // bucket's arrays). Later steps then run on those arrays and return stale rows: the step's
  // time without the copies, against with them, is what they add to a step.
  kUpload,
  kDownload,
};

// Steps of one decode bucket in a row whose copies run before "upload" / "download" skip theirs.
inline constexpr long kDiagCopiesKeptReplays = 16;

// True when RTGEN_DIAG_SKIP names `part` (read once per process; unknown names are reported on
// stderr and ignored, and the parts left out are reported once).
bool DiagSkips(StepPart part);

}  // namespace rtgen::kernels
