#pragma once
// Prometheus metrics (prefix rtgen_, names exactly as in ARCHITECTURE.md), fed by the engine as
// an EngineObserver plus request counters from the service, on metrics created up front.
// Counters and gauges update atomically; a histogram's Observe takes that histogram's mutex,
// which a scrape's Collect holds briefly, so the engine thread can wait that long on a scrape.

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"
#include "server/metrics_http_server.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace rtgen {

// Latency histogram bucket bounds in seconds: 100 µs upward to 60 s.
std::vector<double> DefaultLatencyBuckets();
// "0.0001,0.001,0.01" → bounds in seconds; INVALID_ARGUMENT unless strictly increasing and > 0.
absl::StatusOr<std::vector<double>> ParseLatencyBuckets(absl::string_view csv);

class Metrics : public EngineObserver {
 public:
  explicit Metrics(const std::vector<double>& latency_buckets_seconds);
  ~Metrics() override;

  // Serves /metrics over HTTP on host:port (port 0: a free port, see exposer_port()).
  absl::Status StartExposer(const std::string& host, int port);
  int exposer_port() const { return exposer_port_; }
  // The text exposition format, as a scrape would see it (tests, debugging).
  std::string Render() const;

  // Creates rtgen_graph_replays_total{bucket} at zero for each captured decode batch bucket and,
  // as bucket="prefill_<tokens>", each prefill token bucket (CUDA graphs of prefill and mixed
  // steps).
  void PreRegisterGraphBuckets(const std::vector<int32_t>& buckets,
                               const std::vector<int32_t>& prefill_tokens = {});

  // Requests refused before reaching the engine (invalid, queue full).
  void OnRejected();

  // EngineObserver (engine thread).
  void OnStep(const StepReport& step) override;
  void OnFirstScheduled(absl::Duration queue_time) override;
  void OnToken(absl::Duration since_previous_token, bool first) override;
  void OnFinished(FinishReason reason, const Usage& usage) override;
  void OnPreemption() override;
  void OnPrefixCacheHit(int32_t tokens) override;
  void OnLoad(const LoadSnapshot& load) override;

 private:
  static constexpr int kMaxCachedBucket = 1024;  // graph buckets above this are looked up

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> exposer_;
  int exposer_port_ = 0;

  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* tpot_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Family<prometheus::Counter>* graph_replays_ = nullptr;
  prometheus::Counter* eager_prefill_ = nullptr;  // steps with prompt tokens
  prometheus::Counter* eager_decode_ = nullptr;   // decode-only steps run without a graph
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* prefix_hit_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  // requests_total by finish reason, indexed by FinishReason; kNone slot is "rejected".
  std::array<prometheus::Counter*, 6> requests_{};
  // graph_replays_total{bucket} for buckets <= kMaxCachedBucket, created on first use: decode
  // batch buckets, and prefill token buckets (label prefill_<tokens>).
  using ReplayCounters = std::array<std::atomic<prometheus::Counter*>, kMaxCachedBucket + 1>;
  ReplayCounters replay_counters_{};
  ReplayCounters prefill_replay_counters_{};
  prometheus::Counter* ReplayCounter(ReplayCounters& cache, absl::string_view prefix,
                                     int32_t bucket);
};

}  // namespace rtgen
