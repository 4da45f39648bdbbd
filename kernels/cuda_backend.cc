#include "kernels/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/device_weights.h"
#include "kernels/diag_skip.h"
#include "kernels/env_switch.h"
#include "kernels/graph_buckets.h"
#include "kernels/graph_runner.h"
#include "kernels/hopper_code.h"
#include "kernels/model_forward.h"
#include "kernels/prefill_attention.h"
#include "kernels/sample_penalties.h"
#include "kernels/sample_rows.h"
#include "kernels/step_buffers.h"
#include "kernels/step_check.h"
#include "kernels/step_fill.h"

namespace rtgen {
namespace {

constexpr int32_t kMaxGridY = 65535;  // tokens per step ride on gridDim.y

}  // namespace

struct CudaBackend::StepPlan {
  int32_t bucket = 0;                 // decode graph replayed, 0: none
  int32_t prefill_tokens = 0;         // prefill graph replayed (its token bucket), 0: none
  int32_t prefill_variant = 0;        // with prefill_tokens: its logits rows (graph_runner.h)
  int32_t context_bound = 0;          // decode: its context class (ForwardShape::context_bound)
  std::vector<int32_t> sample_row;    // logits row of each StepInput::samples entry
  StepArrays host;                    // the step's pinned arrays (sampled tokens come back here)
  int32_t slot = 0;                   // its host slot (StepBuffers) and done event
  const StepInput* input = nullptr;   // unchanged until collected (Backend::Launch)
  bool sample = false;                // false: logits only (ComputeLogits)
  std::vector<char> on_host;          // per StepInput::samples entry: sampled in Collect
  bool host_sampled = false;          // a row is sampled on the host from the logits buffer
  bool top = false;                   // a row sampled on the device asks for top-n logprobs
  // A launch after it failed once its sampler was queued: that sampler may have written the
  // chain tokens of this one's rows, so no later launch may name this one's samples.
  bool chain_lost = false;
};

struct CudaBackend::Impl {
  ~Impl() {
    // Steps still in flight (launched, not collected: a caller that drops the backend without
    // collecting) finish before their graphs, events, stream and buffers go.
    if (stream) cudaStreamSynchronize(stream);
    graphs.reset();
    prefill_graphs.reset();
    forward.reset();
    for (cudaEvent_t e : done) {
      if (e) cudaEventDestroy(e);
    }
    if (stream) cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
  // Per host slot: recorded after a step's downloads; the host waits on it in Collect.
  cudaEvent_t done[StepBuffers::kHostSlots] = {};
  int32_t num_sms = 0;
  DeviceWeights weights;
  KvPool kv;
  std::optional<StepBuffers> step;  // created with the KV pool (block-table width)
  std::optional<kernels::PenaltyEntryBuilder> penalties;  // with `step`
  std::unique_ptr<ModelForward> forward;
  std::unique_ptr<GraphRunner> graphs;          // decode steps
  std::unique_ptr<GraphRunner> prefill_graphs;  // prefill and mixed steps
  int64_t decode_graph_replays = 0;             // queued (CudaBackend::decode_graph_replays)
  // RTGEN_DIAG_SKIP's copies (diag_skip.h): the bucket of the latest step and its steps in a row.
  int32_t diag_copies_bucket = 0;
  int64_t diag_copies_steps = 0;
  // Launched, not collected; oldest first. PendingToken(j) of a new step reads the token of
  // in_flight.back()'s samples[j], from its logits row sample_row[j] (ModelForward's chain
  // tokens); a launch after a step with host-sampled rows is refused, so that token is on the
  // device.
  std::deque<StepPlan> in_flight;
};

bool CudaDeviceAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  // A GPU this build has no device code for cannot run the backend: `auto` then takes the CPU.
  return kernels::DeviceCodeLoads(0);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelConfig& config,
                                                           ModelWeights weights,
                                                           const CudaBackendOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b,
                   CudaBackend::Create(config, std::move(weights), options));
  return std::unique_ptr<Backend>(std::move(b));
}

CudaBackend::CudaBackend(const ModelConfig& config, const CudaBackendOptions& options)
    : config_(config), options_(options), impl_(std::make_unique<Impl>()) {}

CudaBackend::~CudaBackend() {
  if (impl_) cudaSetDevice(options_.device);  // destroy on the owning device
}

namespace {

// Parameters of one decoder layer's projections (qkv, o, gate/up, down).
int64_t LayerParams(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = 2 * int64_t{c.num_kv_heads} * c.head_dim, inter = c.intermediate_size;
  return h * (q + kv) + q * h + h * 2 * inter + inter * h;
}

// Checks the options and makes options.device current.
absl::Status SelectDevice(const CudaBackendOptions& options) {
  if (options.max_num_tokens <= 0 || options.max_num_tokens > kMaxGridY) {
    return absl::InvalidArgumentError(absl::StrCat("max_num_tokens must be in [1, ", kMaxGridY,
                                                   "], got ", options.max_num_tokens));
  }
  if (options.max_num_seqs <= 0 || options.max_num_seqs > options.max_num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_num_seqs must be in [1, max_num_tokens],",
                                                   " got ", options.max_num_seqs));
  }
  if (options.max_model_len < 0) {
    return absl::InvalidArgumentError("max_model_len must not be negative");
  }
  if (options.max_prefill_graph_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_prefill_graph_tokens must not be negative, got ", options.max_prefill_graph_tokens));
  }
  constexpr int64_t kMaxPenaltyEntries = int64_t{1} << 28;  // 2 GiB of entries in all
  if (options.max_penalty_tokens < 0 ||
      int64_t{options.max_num_seqs} * options.max_penalty_tokens > kMaxPenaltyEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_penalty_tokens must be in [0, ", kMaxPenaltyEntries / options.max_num_seqs,
        "] for max_num_seqs ", options.max_num_seqs, ", got ", options.max_penalty_tokens));
  }
  int count = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", options.device, " does not exist (", count, " visible)"));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  return absl::OkStatus();
}

// Whether the decode graphs of `bucket` (0: no graph) stage their own copies (step_buffers.h):
// the one rule both their capture and every launch of them follow.
bool StagedBucket(const StepBuffers& step, int32_t bucket) {
  return bucket > 0 && StepBuffers::GraphCopies() && step.Stages(bucket);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const ModelConfig& config, ModelWeights weights, const CudaBackendOptions& options) {
  RETURN_IF_ERROR(SelectDevice(options));
  ASSIGN_OR_RETURN(DeviceWeights device_weights, UploadWeights(config, std::move(weights)));
  return CreateWithDeviceWeights(config, std::move(device_weights), options);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::CreateWithDeviceWeights(
    const ModelConfig& config, DeviceWeights weights, const CudaBackendOptions& options) {
  RETURN_IF_ERROR(SelectDevice(options));
  RETURN_IF_ERROR(CheckDeviceConfig(config));
  std::unique_ptr<CudaBackend> b(new CudaBackend(config, options));
  Impl& impl = *b->impl_;
  RTGEN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&impl.num_sms, cudaDevAttrMultiProcessorCount, options.device));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl.stream, cudaStreamNonBlocking));
  for (cudaEvent_t& e : impl.done) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  b->max_model_len_ = options.max_model_len > 0            ? options.max_model_len
                      : config.max_position_embeddings > 0 ? config.max_position_embeddings
                                                           : 8192;
  impl.weights = std::move(weights);
  StepCapacity capacity{options.max_num_tokens, options.max_num_seqs, 0};
  ASSIGN_OR_RETURN(impl.forward, ModelForward::Create(config, &impl.weights, capacity,
                                                      b->max_model_len_, impl.num_sms,
                                                      options.use_gemv,
                                                      options.persistent_decode,
                                                      options.max_norm_link_rows));
  return b;
}

int64_t CudaBackend::KvBytesPerBlock(int32_t block_size) const {
  return int64_t{2} * config_.num_layers * block_size * config_.num_kv_heads * config_.head_dim *
         static_cast<int64_t>(sizeof(__nv_bfloat16));
}

int64_t CudaBackend::weight_bytes() const { return impl_->weights.bytes; }

bool CudaBackend::persistent_decode() const { return impl_->forward->persistent_decode(); }

bool CudaBackend::links_norms_at(int32_t rows) const {
  return impl_->forward->LinksNorms(ForwardShape::Decode(rows));
}

bool CudaBackend::links_final_norm_at(int32_t rows) const {
  return impl_->forward->LinksFinalNorm(ForwardShape::Decode(rows));
}

bool CudaBackend::merges_in_o_at(int32_t rows, int32_t longest_context) const {
  const int32_t bound = kernels::DecodeContextBoundFor(impl_->forward->DecodeContextBounds(rows),
                                                       longest_context);
  return impl_->forward->MergesInO(ForwardShape::Decode(rows, bound));
}

bool CudaBackend::folds_norms_at(int32_t rows) const {
  return impl_->forward->FoldsNorms(ForwardShape::Decode(rows));
}

bool CudaBackend::prefetches_kv_at(int32_t rows) const {
  return impl_->forward->PrefetchesKv(ForwardShape::Decode(rows));
}

std::vector<int32_t> CudaBackend::graph_buckets() const {
  return impl_->graphs ? impl_->graphs->buckets() : std::vector<int32_t>{};
}

size_t CudaBackend::graph_count() const {
  return impl_->graphs ? impl_->graphs->num_graphs() : 0;
}

int64_t CudaBackend::decode_graph_replays() const { return impl_->decode_graph_replays; }

void CudaBackend::FailNextEagerStepAfterLayersForTesting(int32_t layers) {
  if (impl_->forward) impl_->forward->FailNextRunAfterLayersForTesting(layers);
}

std::vector<int32_t> CudaBackend::prefill_graph_tokens() const {
  return impl_->prefill_graphs ? impl_->prefill_graphs->buckets() : std::vector<int32_t>{};
}

size_t CudaBackend::mixed_graph_count() const {
  return impl_->prefill_graphs ? impl_->prefill_graphs->num_graphs(/*min_variant=*/2) : 0;
}

absl::Status CudaBackend::AllocateKvCache(const KvCacheShape& shape) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache shape must be positive, got ",
                                                   shape.num_blocks, " blocks of ",
                                                   shape.block_size, " tokens"));
  }
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  Impl& impl = *impl_;
  if (!impl.in_flight.empty()) {
    return absl::FailedPreconditionError("AllocateKvCache while steps are in flight");
  }
  // The graphs point into the old pool. Until this allocation succeeds the backend holds no
  // cache, so CheckStep refuses every step: a failed reallocation must not leave the old step
  // buffers over a new, empty pool.
  const auto drop_cache = [&impl] {
    impl.graphs.reset();
    impl.prefill_graphs.reset();
    impl.step.reset();
    impl.penalties.reset();
    impl.kv = KvPool();
  };
  drop_cache();
  const absl::Status allocated = [&]() -> absl::Status {
    impl.kv.num_blocks = shape.num_blocks;
    impl.kv.block_size = shape.block_size;
    impl.kv.layer_elems =
        int64_t{shape.num_blocks} * shape.block_size * config_.num_kv_heads * config_.head_dim;
    const size_t bytes = static_cast<size_t>(impl.kv.layer_elems) * config_.num_layers *
                         sizeof(__nv_bfloat16);
    ASSIGN_OR_RETURN(impl.kv.k, DeviceBuffer::Allocate(bytes));
    ASSIGN_OR_RETURN(impl.kv.v, DeviceBuffer::Allocate(bytes));
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(impl.kv.k.get(), 0, bytes, impl.stream));
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(impl.kv.v.get(), 0, bytes, impl.stream));
    // The forward pass reads block tables with this row stride.
    const int32_t width = impl.forward->BlockTableWidth(shape.block_size);
    // Every row of a step may be penalized on the device, with as many entries as the tokens its
    // penalties read (at most max_penalty_tokens) and no more than the vocabulary.
    const int64_t entries = int64_t{options_.max_num_seqs} *
                            std::min(options_.max_penalty_tokens, config_.vocab_size);
    ASSIGN_OR_RETURN(StepBuffers step,
                     StepBuffers::Create({options_.max_num_tokens, options_.max_num_seqs, width,
                                          static_cast<int32_t>(entries)}));
    impl.step.emplace(std::move(step));
    impl.penalties.emplace(config_.vocab_size);
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl.stream));
    if (options_.enable_cuda_graphs) RETURN_IF_ERROR(CaptureGraphs());
    return absl::OkStatus();
  }();
  if (!allocated.ok()) {
    drop_cache();  // whatever part was made: steps are refused until an allocation succeeds
    (void)cudaGetLastError();  // an out-of-memory error is not sticky: no later check reports it
  }
  return allocated;
}

absl::Status CudaBackend::CaptureGraphs() {
  Impl& impl = *impl_;
  const int32_t most = std::min(options_.max_num_seqs, options_.max_num_tokens);
  std::vector<int32_t> buckets = options_.graph_batch_sizes;
  if (buckets.empty()) {
    buckets = DefaultGraphBuckets(
        options_.max_graph_batch_size > 0 ? std::min(options_.max_graph_batch_size, most) : most);
  }
  const auto start = std::chrono::steady_clock::now();
  size_t free_before = 0, free_after = 0, total = 0;
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_before, &total));
  for (int32_t b : buckets) {
    if (b <= 0 || b > most) {
      return absl::InvalidArgumentError(absl::StrCat("graph batch size ", b,
                                                     " is outside [1, ", most, "]"));
    }
  }
  auto prepare = [&](int32_t bucket, int32_t /*context_bound*/) -> absl::Status {
    // The previous bucket's upload may still be reading the pinned mirror, at other offsets.
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl.stream));
    const StepArrays h = impl.step->host(bucket, bucket);
    PadRows(h, 0, bucket, /*prefill=*/false);
    PadSeqs(h, 0, bucket, /*prefill=*/false);
    return impl.step->Upload(bucket, bucket, 0, impl.stream);
  };
  auto bounds = [&](int32_t bucket) { return impl.forward->DecodeContextBounds(bucket); };
  // Staged buckets (step_buffers.h): the graph holds its copies, captured for host slot 0 and
  // instantiated again for slot 1; other buckets' graphs once.
  auto record = [&](int32_t bucket, int32_t context_bound) -> absl::Status {
    ForwardShape shape = ForwardShape::Decode(bucket, context_bound);
    shape.staged_inputs = StagedBucket(*impl.step, bucket);
    if (shape.staged_inputs) RETURN_IF_ERROR(impl.step->StageIn(bucket, bucket, impl.stream, 0));
    RETURN_IF_ERROR(
        impl.forward->Run(shape, impl.step->device(bucket, bucket), impl.kv, impl.stream));
    if (shape.staged_inputs) RETURN_IF_ERROR(impl.step->StageOut(bucket, bucket, impl.stream, 0));
    return absl::OkStatus();
  };
  static_assert(GraphRunner::kSlots == StepBuffers::kHostSlots);
  GraphRunner::RetargetFn retarget = nullptr;
  if (StepBuffers::GraphCopies()) {
    retarget = [&](cudaGraph_t graph, int32_t bucket, int32_t slot) -> absl::StatusOr<bool> {
      int32_t found = 0;
      RETURN_IF_ERROR(impl.step->RetargetGraphCopies(graph, slot, &found));
      // Copies not found in a staged graph would leave slot 1's steps on slot 0's arrays.
      const bool staged = StagedBucket(*impl.step, bucket);
      const int32_t expected = staged ? 2 : 0;
      if (found != expected) {
        return absl::InternalError(absl::StrCat("a decode graph holds ", found,
                                                " staged copies, not ", expected));
      }
      return staged;
    };
  }
  // Decode bucket shapes are tuned here, in the eager warm-up run before each capture; no
  // other step tunes (matmul.h).
  impl.forward->AllowMatmulTuning(true);
  absl::StatusOr<std::unique_ptr<GraphRunner>> graphs =
      GraphRunner::Capture("decode", buckets, bounds, prepare, record, impl.stream, retarget);
  impl.forward->AllowMatmulTuning(false);
  ASSIGN_OR_RETURN(impl.graphs, std::move(graphs));
  RETURN_IF_ERROR(CapturePrefillGraphs());
  RTGEN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_after, &total));
  graph_capture_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  graph_capture_bytes_ = static_cast<int64_t>(free_before) - static_cast<int64_t>(free_after);
  return absl::OkStatus();
}

absl::Status CudaBackend::CapturePrefillGraphs() {
  Impl& impl = *impl_;
  // RTGEN_PREFILL_GRAPHS=0: none (A/B against eager prefill steps).
  static const bool enabled = kernels::EnvOnUnlessZero("RTGEN_PREFILL_GRAPHS");
  if (!enabled) return absl::OkStatus();
  std::vector<int32_t> tokens = options_.prefill_graph_tokens;
  if (tokens.empty()) {
    tokens = DefaultPrefillGraphTokens(
        std::min(options_.max_prefill_graph_tokens, options_.max_num_tokens));
  }
  for (int32_t t : tokens) {
    if (t <= 0 || t > options_.max_num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("prefill graph token count ", t,
                                                     " is outside [1, max_num_tokens = ",
                                                     options_.max_num_tokens, "]"));
    }
  }
  if (tokens.empty()) return absl::OkStatus();
  // Variants: the logits rows. One sequence's chunk: its last row sampled (1) or no logits (0, a
  // chunk before the last). Several sequences' chunks, decode rows among them (a mixed step): 2,
  // 4, 8, ... sequences, a logits row each (RTGEN_MIXED_GRAPHS=0: none such).
  static const bool mixed = kernels::EnvOnUnlessZero("RTGEN_MIXED_GRAPHS");
  auto variants = [&](int32_t bucket) {
    std::vector<int32_t> out = {0, 1};
    if (mixed && options_.mixed_prefill_graphs) {
      for (int32_t seqs : DefaultMixedGraphSeqs(bucket, options_.max_num_seqs)) {
        out.push_back(seqs);
      }
    }
    return out;
  };
  // All padding: rows at position -1 attend to nothing and store no keys; every sequence has no
  // keys and its logits row reads row 0.
  auto prepare = [&](int32_t bucket, int32_t logits_rows) -> absl::Status {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl.stream));
    const int32_t seqs = std::max(logits_rows, 1);
    const StepArrays h = impl.step->host(bucket, seqs);
    PadRows(h, 0, bucket, /*prefill=*/true);
    PadSeqs(h, 0, seqs, /*prefill=*/true);
    return impl.step->Upload(bucket, seqs, 0, impl.stream);
  };
  auto record = [&](int32_t bucket, int32_t logits_rows) -> absl::Status {
    return impl.forward->Run(ForwardShape::PrefillGraph(bucket, logits_rows),
                             impl.step->device(bucket, std::max(logits_rows, 1)), impl.kv,
                             impl.stream);
  };
  ASSIGN_OR_RETURN(impl.prefill_graphs,
                   GraphRunner::Capture("prefill", tokens, variants, prepare, record, impl.stream));
  return absl::OkStatus();
}

absl::Status CudaBackend::CheckStep(const StepInput& in) const {
  if (!impl_->step) return absl::FailedPreconditionError("AllocateKvCache was not called");
  const StepCapacity& cap = impl_->step->capacity();
  const CudaStepLimits limits{.max_tokens = cap.max_tokens,
                              .max_seqs = cap.max_seqs,
                              .max_blocks_per_seq = cap.max_blocks_per_seq,
                              .block_size = impl_->kv.block_size,
                              .num_blocks = impl_->kv.num_blocks,
                              .vocab_size = config_.vocab_size};
  return CheckCudaStep(in, limits, [this](int32_t id) { return PendingRow(id); });
}

absl::Status CudaBackend::LaunchStep(const StepInput& in, bool sample) {
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  Impl& impl = *impl_;
  if (static_cast<int32_t>(impl.in_flight.size()) >= kMaxStepsInFlight) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend cuda: ", kMaxStepsInFlight, " steps are already in flight"));
  }
  if (!impl.in_flight.empty() && impl.in_flight.back().host_sampled) {
    // Its rows are sampled from the one logits buffer in Collect; a later step would overwrite it.
    return absl::FailedPreconditionError(
        "a step with rows sampled on the host (long penalty lists) must be collected before "
        "the next launch");
  }
  RETURN_IF_ERROR(CheckStep(in));
  const int32_t width = impl.step->capacity().max_blocks_per_seq;
  const int32_t n = in.num_tokens(), s = in.num_seqs();
  StepPlan plan;
  plan.input = &in;
  plan.sample = sample;
  // Consecutive steps use different host slots: the one in flight may not have uploaded yet.
  plan.slot = impl.in_flight.empty() ? 0 : 1 - impl.in_flight.back().slot;
  if (impl.graphs && in.is_decode_only) plan.bucket = impl.graphs->BucketFor(s);
  // Sequences (and logits rows) of an eager step's layout.
  const int32_t step_seqs = std::max(s, static_cast<int32_t>(in.samples.size()));
  if (impl.prefill_graphs && !in.is_decode_only && sample) {
    // The prefill graph of the step's token bucket with its logits rows (graph_runner.h): one
    // sequence's exactly, several sequences' the smallest multi-sequence variant that holds them
    // (up to min(tokens, max_num_seqs): a step with more, possible only with sequences without
    // tokens, runs eagerly, as does one whose padding costs more than it saves).
    const int32_t tokens = impl.prefill_graphs->BucketFor(n);
    const int32_t variant = step_seqs == 1
                                ? static_cast<int32_t>(in.samples.size())
                                : impl.prefill_graphs->VariantAtLeast(tokens, step_seqs);
    if (tokens > 0 && variant >= 0 &&
        PrefillPaddingPays(LayerParams(config_), config_.num_layers, n, tokens)) {
      plan.prefill_tokens = tokens;
      plan.prefill_variant = variant;
    }
  }
  // A decode step's context class (ForwardShape::context_bound): the graph's of its bucket, or
  // for an eager step the class of its own batch size, chosen the same way.
  int32_t& context_bound = plan.context_bound;
  if (in.is_decode_only) {
    const int32_t longest =
        s > 0 ? *std::max_element(in.context_lens.begin(), in.context_lens.begin() + s) : 0;
    context_bound = plan.bucket > 0
                        ? impl.graphs->VariantFor(plan.bucket, longest)
                        : kernels::DecodeContextBoundFor(impl.forward->DecodeContextBounds(s),
                                                         longest);
  }
  // Tokens: a decode graph's bucket (= seqs), a prefill graph's token bucket, or the step's.
  const int32_t rows = plan.bucket > 0           ? plan.bucket
                       : plan.prefill_tokens > 0 ? plan.prefill_tokens
                                                 : n;
  // Sequences and sampled rows of the step's layout (a graph's: its bucket or variant).
  const int32_t seqs = plan.bucket > 0           ? plan.bucket
                       : plan.prefill_tokens > 0 ? std::max(plan.prefill_variant, 1)
                                                 : step_seqs;
  plan.host = impl.step->host(rows, seqs, plan.slot);
  const StepArrays& h = plan.host;

  FillStepInputs(in, h, width, [this](int32_t id) { return PendingRow(id); });
  if (!in.is_decode_only) MarkDecodeRows(in, h, seqs);
  PadRows(h, n, rows, plan.prefill_tokens > 0);  // a graph's rows past the step's tokens
  PadSeqs(h, s, seqs, plan.prefill_tokens > 0);  // a graph's sequences past the step's

  bool samples_in_token_order = true;  // logits row i is token i's (a graph bucket's always are)
  const int32_t num_rows = FillSampleRows(in, plan.bucket, plan.prefill_variant, h,
                                          &plan.sample_row, &samples_in_token_order);
  plan.on_host.assign(in.samples.size(), 0);
  int32_t penalty_entries = 0;  // used of the step's h.penalty_entries
  const std::span<kernels::SamplePenaltyEntry> entries(
      h.penalty_entries, static_cast<size_t>(impl.step->capacity().max_penalty_entries));
  for (size_t i = 0; i < in.samples.size(); ++i) {
    const SampleRequest& r = in.samples[i];
    kernels::SampleRowParams& row = h.sample_params[plan.sample_row[i]];
    row = kernels::SampleRowParams{};  // greedy
    if (!sample) continue;
    if (NeedsHostSampling(r, options_.max_penalty_tokens)) {
      plan.on_host[i] = 1;  // its logits row stays unmodified (greedy on the device)
      plan.host_sampled = true;
      continue;
    }
    row = DeviceParams(r);
    plan.top = plan.top || row.top_logprobs > 0;
    if (!kernels::HasPenalties(*r.params)) continue;
    // A pending last output token is this step's input token of the row's sequence.
    const int32_t last_token = in.query_start[r.seq_index + 1] - 1;
    const bool pending = !r.output.empty() && IsPendingToken(r.output.back());
    if (pending && in.token_ids[last_token] != r.output.back()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "samples[", i, "]: the output's last token is pending (", r.output.back(),
          ") but the sequence's input token is ", in.token_ids[last_token]));
    }
    RETURN_IF_ERROR(impl.penalties->Append(*r.params, r.prompt, r.output,
                                           pending ? last_token : -1, entries,
                                           &penalty_entries, &row));
  }
  bool sampler_may_have_run = false;  // this step's sampler: it writes the chain tokens
  // RTGEN_DIAG_SKIP's "upload" and "download" (diag_skip.h): a decode graph step's copies left
  // out once the bucket's arrays are laid out. Steps are counted only while either is named.
  const bool skip_upload = kernels::DiagSkips(kernels::StepPart::kUpload);
  const bool skip_download = kernels::DiagSkips(kernels::StepPart::kDownload);
  bool copies_kept = true;
  if (skip_upload || skip_download) {
    if (plan.bucket != impl.diag_copies_bucket) {
      impl.diag_copies_bucket = plan.bucket;
      impl.diag_copies_steps = 0;
    }
    copies_kept = plan.bucket == 0 || impl.diag_copies_steps++ < kernels::kDiagCopiesKeptReplays;
  }
  const bool upload = copies_kept || !skip_upload;
  const bool download = copies_kept || !skip_download;
  // A staged decode graph copies the step's arrays itself (step_buffers.h), all but penalties.
  const bool staged = StagedBucket(*impl.step, plan.bucket);
  const auto enqueue = [&]() -> absl::Status {
    if (staged) {
      RETURN_IF_ERROR(impl.step->UploadPenalties(penalty_entries, impl.stream, plan.slot));
    } else if (upload) {
      RETURN_IF_ERROR(impl.step->Upload(rows, seqs, in.max_blocks_per_seq, impl.stream,
                                        plan.slot, penalty_entries));
    }
    // A graph holds its sampler: once its launch is tried, it may have run.
    sampler_may_have_run = plan.bucket > 0 || plan.prefill_tokens > 0;
    if (plan.bucket > 0) {
      RETURN_IF_ERROR(impl.graphs->Replay(plan.bucket, context_bound, impl.stream, plan.slot));
      ++impl.decode_graph_replays;
    } else if (plan.prefill_tokens > 0) {
      RETURN_IF_ERROR(
          impl.prefill_graphs->Replay(plan.prefill_tokens, plan.prefill_variant, impl.stream));
    } else {
      const ForwardShape shape{n, s, num_rows, in.is_decode_only, sample, context_bound,
                               samples_in_token_order};
      const absl::Status ran =
          impl.forward->Run(shape, impl.step->device(rows, seqs), impl.kv, impl.stream);
      sampler_may_have_run = impl.forward->sampler_queued();
      RETURN_IF_ERROR(ran);
    }
    if (sample && download && !staged) {
      RETURN_IF_ERROR(impl.step->Download(rows, seqs, impl.stream, plan.slot, plan.top));
    }
    RTGEN_CUDA_RETURN_IF_ERROR(cudaEventRecord(impl.done[plan.slot], impl.stream));
    return absl::OkStatus();
  };
  if (absl::Status queued = enqueue(); !queued.ok()) {
    // Part of the step may be queued: let it finish before the host slot is filled again, and
    // clear the runtime's last error, so that the next step's launch checks see only their own.
    // A kernel that leaves state for a later one never queued (a linked norm's sum) would leave
    // it for the next step: zero it.
    (void)cudaStreamSynchronize(impl.stream);
    (void)cudaGetLastError();
    if (sampler_may_have_run && sample && !impl.in_flight.empty()) {
      impl.in_flight.back().chain_lost = true;
    }
    if (const absl::Status reset = impl.forward->ResetStepState(impl.stream); !reset.ok()) {
      return absl::InternalError(absl::StrCat(queued.message(), "; and resetting the step state ",
                                              "after it failed: ", reset.message()));
    }
    (void)cudaStreamSynchronize(impl.stream);
    return queued;
  }
  impl.in_flight.push_back(std::move(plan));
  return absl::OkStatus();
}

int32_t CudaBackend::PendingRow(int32_t token_id) const {
  if (impl_->in_flight.empty()) return -1;
  const StepPlan& previous = impl_->in_flight.back();
  const int32_t j = PendingSampleIndex(token_id);
  if (!previous.sample || previous.chain_lost ||
      j >= static_cast<int32_t>(previous.sample_row.size())) {
    return -1;
  }
  return previous.sample_row[j];
}

absl::StatusOr<CudaBackend::StepPlan> CudaBackend::WaitOldest() {
  Impl& impl = *impl_;
  if (impl.in_flight.empty()) {
    return absl::FailedPreconditionError("Collect without a launched step");
  }
  StepPlan plan = std::move(impl.in_flight.front());
  impl.in_flight.pop_front();
  RTGEN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  RTGEN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(impl.done[plan.slot]));
  return plan;
}

absl::Status CudaBackend::Launch(const StepInput& input) {
  return LaunchStep(input, /*sample=*/true);
}

bool CudaBackend::ChainsSample(const SampleRequest& sample) const {
  return !NeedsHostSampling(sample, options_.max_penalty_tokens);
}

absl::StatusOr<StepOutput> CudaBackend::Execute(const StepInput& input) {
  if (!impl_->in_flight.empty()) {
    return absl::FailedPreconditionError("Execute while steps are in flight (Collect them)");
  }
  RETURN_IF_ERROR(LaunchStep(input, /*sample=*/true));
  return Collect();
}

absl::StatusOr<StepOutput> CudaBackend::Collect() {
  ASSIGN_OR_RETURN(StepPlan plan, WaitOldest());
  const StepInput& input = *plan.input;
  const StepArrays& h = plan.host;
  const int32_t vocab = config_.vocab_size;
  StepOutput out;
  out.graph_replayed = plan.bucket > 0 || plan.prefill_tokens > 0;
  out.graph_bucket = plan.bucket > 0 ? plan.bucket : plan.prefill_tokens;
  out.context_bound = plan.context_bound;
  out.sampled.reserve(input.samples.size());
  std::vector<float> row;
  for (size_t i = 0; i < input.samples.size(); ++i) {
    const SampleRequest& s = input.samples[i];
    const int32_t r = plan.sample_row[i];
    if (plan.on_host[i]) {
      // The logits buffer is this step's: LaunchStep refuses a later launch until this Collect.
      row.resize(vocab);
      RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(row.data(),
                                            impl_->forward->logits() + int64_t{r} * vocab,
                                            vocab * sizeof(float), cudaMemcpyDeviceToHost));
      out.sampled.push_back(SampleToken(row, *s.params, s.prompt, s.output, s.seed));
      continue;
    }
    SampledToken t;
    t.token_id = h.out_tokens[r];
    t.logprob = h.out_logprobs[r];
    const int32_t n = std::min(s.params->logprobs, vocab);
    const kernels::SampleTopEntry* top = h.out_top + int64_t{r} * kernels::kMaxTopLogprobs;
    for (int32_t j = 0; j < n; ++j) t.top.push_back({top[j].token, top[j].logprob});
    out.sampled.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<float>> CudaBackend::ComputeLogits(const StepInput& input) {
  if (!impl_->in_flight.empty()) {
    return absl::FailedPreconditionError("ComputeLogits while steps are in flight (Collect them)");
  }
  RETURN_IF_ERROR(LaunchStep(input, /*sample=*/false));
  ASSIGN_OR_RETURN(StepPlan plan, WaitOldest());
  const int64_t vocab = config_.vocab_size;
  std::vector<float> out(input.samples.size() * vocab);
  for (size_t i = 0; i < input.samples.size(); ++i) {
    RTGEN_CUDA_RETURN_IF_ERROR(cudaMemcpy(out.data() + i * vocab,
                                          impl_->forward->logits() + plan.sample_row[i] * vocab,
                                          vocab * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return out;
}

}  // namespace rtgen
