#pragma once
// rtgen-engine-bench's report: the bandwidth floor and the figures of a decode row, the JSON of a
// model's shape and of the GPU's telemetry during a run, and the summary table printed at the end
// from the JSON of every model. Host code.

#include <cstdint>
#include <string>

#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tools/engine_bench_timing.h"
#include "tools/gpu_telemetry.h"

namespace rtgen::tools {

using Json = nlohmann::ordered_json;

// Bytes one decode step must read: every weight (the bf16 embedding table only through the LM head
// when tied; untied, only the batch's rows are gathered, counted as none) plus each sequence's KV
// at the run's mean context (contexts prompt + 1 .. prompt + steps).
struct StepBytes {
  double weights = 0.0;
  double kv_per_seq = 0.0;
  // The bytes of a `batch`-sequence step.
  double Of(int32_t batch) const { return weights + batch * kv_per_seq; }
};
StepBytes FloorBytes(const ModelConfig& c, int64_t weight_bytes, int64_t kv_bytes_per_token,
                     int32_t prompt, int32_t steps);

// The floor of a `batch`-sequence step in ms: its bytes over `bandwidth` (bytes/s, the measured
// device-to-device copy rate).
double FloorMs(const StepBytes& bytes, int32_t batch, double bandwidth);

// A graph run's decode row: batch, the three TPOTs (ms; a run not made is null, and so is its
// pipelined_tokens_equal), tokens/s, floor_ms, floor_fraction (floor over TPOT), achieved_gbs
// (the step's bytes over TPOT, GB/s) and graph_replayed.
Json GraphDecodeRow(int32_t batch, const DecodeResult& graph, const StepBytes& bytes,
                    double bandwidth);

// The eager run's figures added to its graph row: eager_tpot_ms, graph_speedup (eager TPOT over
// graph TPOT) and greedy_tokens_equal_eager (the fraction of the graph run's tokens the eager run
// matches position by position; 0 when the graph run has none).
void AddEagerFigures(const DecodeResult& eager, const DecodeResult& graph, Json& row);

// The shape's fields the figures depend on.
Json ConfigJson(const ModelConfig& c);

// The GPU telemetry of one run into a decode row's fields `<prefix>gpu_...`.
void AddTelemetry(const TelemetrySummary& gpu, const std::string& prefix, Json& row);

// One line per model and batch (graph TPOT, built-in-loop and pipelined TPOT, tokens/s, floor,
// its share of TPOT, the achieved GB/s, eager TPOT and the graph speed-up, greedy tokens equal
// to eager), then each model's TTFT and mixed-step lines, to stdout. `models` maps a model's name
// to its JSON (or to {"error": ...}).
void PrintTable(const Json& models);

}  // namespace rtgen::tools
