#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rtgen {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Sequences per step: powers of two and the CUDA graph buckets.
const Histogram::BucketBoundaries kBatchBuckets = {1,  2,  4,   8,   16,  24,  32,
                                                   48, 64, 128, 256, 512, 1024};

Histogram* AddHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help, const std::vector<double>& buckets) {
  return &BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Gauge* AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return &BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Counter* AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help) {
  return &BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

// A duration in seconds, never below 0: arrival and token times are wall-clock readings
// (absl::Now), which an NTP step can move backwards between two of them; a negative sample would
// lower the histogram's _sum, which rate() takes for a counter reset.
double Seconds(absl::Duration d) { return std::max(0.0, absl::ToDoubleSeconds(d)); }

}  // namespace

std::vector<double> DefaultLatencyBuckets() {
  // 2.0 is the TTFT alert's threshold (deploy/prometheus/rtgen-rules.yaml): between 1.0 and
  // 2.5 histogram_quantile interpolates, and TTFTs all at 1.1 s read as a p99 of 2.49 s. The
  // 0.1 ms steps up to 1 ms are the GPU's token gaps (0.4-0.9 ms): with bounds at 0.5 and 1 ms
  // alone, gaps all at 0.55 ms read as a p99 of 0.995 ms, and a 70 % regression did not show.
  return {0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.0006, 0.0007, 0.0008, 0.0009,
          0.001,  0.00125, 0.0015, 0.002, 0.0025, 0.005,  0.01,   0.025,  0.05,
          0.1,    0.25,   0.5,    1.0,    2.0,    2.5,    5.0,    10.0,   30.0,  60.0};
}

absl::StatusOr<std::vector<double>> ParseLatencyBuckets(absl::string_view csv) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(csv, ',', absl::SkipWhitespace())) {
    double value = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &value) || !(value > 0) ||
        !std::isfinite(value)) {  // +Inf is every histogram's own last bucket
      return absl::InvalidArgumentError(
          absl::StrCat("latency_buckets: '", part,
                       "' is not a positive, finite number of seconds"));
    }
    if (!out.empty() && value <= out.back()) {
      return absl::InvalidArgumentError("latency_buckets: bounds must be strictly increasing");
    }
    out.push_back(value);
  }
  if (out.empty()) return absl::InvalidArgumentError("latency_buckets: no bucket bounds given");
  return out;
}

Metrics::Metrics(const std::vector<double>& latency) {
  registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *registry_;
  ttft_ = AddHistogram(r, "rtgen_time_to_first_token_seconds", "Arrival to first token sent.",
                       latency);
  tpot_ = AddHistogram(r, "rtgen_time_per_output_token_seconds",
                       "Gap between consecutive tokens of a request.", latency);
  e2e_ = AddHistogram(r, "rtgen_e2e_request_latency_seconds", "Arrival to last message.",
                      latency);
  queue_time_ = AddHistogram(r, "rtgen_queue_time_seconds", "Arrival to first scheduled.",
                             latency);
  batch_size_ = AddHistogram(r, "rtgen_batch_size", "Sequences per executed step.",
                             kBatchBuckets);
  waiting_ = AddGauge(r, "rtgen_requests_waiting", "Requests in the queue.");
  running_ = AddGauge(r, "rtgen_requests_running", "Sequences in the running batch.");
  kv_usage_ = AddGauge(r, "rtgen_kv_cache_usage_ratio", "Used / total KV blocks.");
  graph_replays_ = &BuildCounter()
                        .Name("rtgen_graph_replays_total")
                        .Help("Steps run as a captured CUDA graph, by bucket: the decode "
                              "batch size, or prefill_<tokens> for a prefill or mixed step "
                              "(its token bucket).")
                        .Register(r);
  auto& eager = BuildCounter()
                    .Name("rtgen_eager_steps_total")
                    .Help("Steps run without a graph, by reason.")
                    .Register(r);
  eager_prefill_ = &eager.Add({{"reason", "prefill"}});
  eager_decode_ = &eager.Add({{"reason", "decode"}});
  prompt_tokens_ = AddCounter(r, "rtgen_prompt_tokens_total", "Prompt tokens computed.");
  generation_tokens_ = AddCounter(r, "rtgen_generation_tokens_total", "Tokens generated.");
  prefix_hit_tokens_ = AddCounter(r, "rtgen_prefix_cache_hit_tokens_total",
                                  "Prompt tokens served from the prefix cache.");
  preemptions_ = AddCounter(r, "rtgen_preemptions_total", "Recompute preemptions.");
  auto& requests = BuildCounter()
                       .Name("rtgen_requests_total")
                       .Help("Finished requests, by finish reason.")
                       .Register(r);
  requests_[static_cast<int>(FinishReason::kNone)] =
      &requests.Add({{"finish_reason", "rejected"}});
  for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength,
                              FinishReason::kCancelled, FinishReason::kDeadline,
                              FinishReason::kError}) {
    requests_[static_cast<int>(reason)] =
        &requests.Add({{"finish_reason", FinishReasonName(reason)}});
  }
}

Metrics::~Metrics() = default;

absl::Status Metrics::StartExposer(const std::string& host, int port) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start(host, port, [this] { return Render(); });
  if (!server.ok()) return server.status();
  exposer_ = *std::move(server);
  exposer_port_ = exposer_->port();
  return absl::OkStatus();
}

std::string Metrics::Render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::PreRegisterGraphBuckets(const std::vector<int32_t>& buckets,
                                      const std::vector<int32_t>& prefill_tokens) {
  for (int32_t bucket : buckets) ReplayCounter(replay_counters_, "", bucket);
  for (int32_t tokens : prefill_tokens) ReplayCounter(prefill_replay_counters_, "prefill_", tokens);
}

prometheus::Counter* Metrics::ReplayCounter(ReplayCounters& cache, absl::string_view prefix,
                                            int32_t bucket) {
  if (bucket < 0 || bucket > kMaxCachedBucket) {
    return &graph_replays_->Add({{"bucket", absl::StrCat(prefix, bucket)}});
  }
  prometheus::Counter* counter = cache[bucket].load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the existing counter for the same labels, so a race is harmless.
    counter = &graph_replays_->Add({{"bucket", absl::StrCat(prefix, bucket)}});
    cache[bucket].store(counter, std::memory_order_release);
  }
  return counter;
}

void Metrics::OnRejected() { requests_[static_cast<int>(FinishReason::kNone)]->Increment(); }

// Generated tokens are counted per token in OnToken, before the client can see them.
void Metrics::OnStep(const StepReport& step) {
  batch_size_->Observe(step.batch_size);
  if (step.prompt_tokens > 0) prompt_tokens_->Increment(step.prompt_tokens);
  if (!step.graph_replayed) {
    (step.prefill ? eager_prefill_ : eager_decode_)->Increment();
    return;
  }
  // A replayed step with prefill chunks is a prefill graph's: its bucket is a token count.
  if (step.prefill) {
    ReplayCounter(prefill_replay_counters_, "prefill_", step.bucket)->Increment();
  } else {
    ReplayCounter(replay_counters_, "", step.bucket)->Increment();
  }
}

void Metrics::OnFirstScheduled(absl::Duration queue_time) {
  queue_time_->Observe(Seconds(queue_time));
}

void Metrics::OnToken(absl::Duration since_previous_token, bool first) {
  // The first token's gap is measured from arrival: that is the TTFT.
  (first ? ttft_ : tpot_)->Observe(Seconds(since_previous_token));
  // Here rather than in OnStep: the engine calls OnToken before it streams the token, so a
  // client that scrapes after its stream ended sees every one of its tokens counted.
  generation_tokens_->Increment();
}

void Metrics::OnFinished(FinishReason reason, const Usage& usage) {
  const int index = static_cast<int>(reason);
  if (index > 0 && index < static_cast<int>(requests_.size())) requests_[index]->Increment();
  e2e_->Observe(Seconds(usage.total_time));
}

void Metrics::OnPreemption() { preemptions_->Increment(); }

void Metrics::OnPrefixCacheHit(int32_t tokens) { prefix_hit_tokens_->Increment(tokens); }

void Metrics::OnLoad(const LoadSnapshot& load) {
  waiting_->Set(load.waiting);
  running_->Set(load.running);
  const double total = load.kv_blocks_total;
  kv_usage_->Set(total > 0 ? (total - load.kv_blocks_free) / total : 0.0);
}

}  // namespace rtgen
