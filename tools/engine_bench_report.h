#pragma once
// rtgen-engine-bench's report: the JSON of a model's shape and of the GPU's telemetry during a
// run, and the summary table printed at the end from the JSON of every model. Host code.

#include <string>

#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tools/gpu_telemetry.h"

namespace rtgen::tools {

using Json = nlohmann::ordered_json;

// The shape's fields the figures depend on.
Json ConfigJson(const ModelConfig& c);

// The GPU telemetry of one run into a decode row's fields `<prefix>gpu_...`.
void AddTelemetry(const TelemetrySummary& gpu, const std::string& prefix, Json& row);

// One line per model and batch (graph TPOT, built-in-loop and pipelined TPOT, tokens/s, floor,
// eager TPOT and the graph speed-up, greedy tokens equal to eager), then each model's TTFT and
// mixed-step lines, to stdout. `models` maps a model's name to its JSON (or to {"error": ...}).
void PrintTable(const Json& models);

}  // namespace rtgen::tools
