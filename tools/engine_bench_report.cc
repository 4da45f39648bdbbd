#include "tools/engine_bench_report.h"

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"

namespace rtgen::tools {

StepBytes FloorBytes(const ModelConfig& c, int64_t weight_bytes, int64_t kv_bytes_per_token,
                     int32_t prompt, int32_t steps) {
  StepBytes b;
  b.weights = static_cast<double>(weight_bytes);
  if (!c.tie_word_embeddings) b.weights -= 2.0 * c.vocab_size * c.hidden_size;
  const double mean_context = prompt + (steps + 1) / 2.0;
  b.kv_per_seq = mean_context * static_cast<double>(kv_bytes_per_token);
  return b;
}

double FloorMs(const StepBytes& bytes, int32_t batch, double bandwidth) {
  return bytes.Of(batch) / bandwidth * 1e3;
}

namespace {

// A figure, or null for a run not made.
Json OrNull(const std::optional<double>& figure) {
  return figure ? Json(*figure) : Json(nullptr);
}

// Row field `key` with `decimals` decimals, or "-" where the row has none (null or absent).
std::string Cell(const Json& row, const char* key, int decimals) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return "-";
  return absl::StrFormat("%.*f", decimals, it->get<double>());
}

}  // namespace

Json GraphDecodeRow(int32_t batch, const DecodeResult& graph, const StepBytes& bytes,
                    double bandwidth) {
  const double floor_ms = FloorMs(bytes, batch, bandwidth);
  return Json{{"batch", batch},
              {"tpot_ms", graph.tpot_ms},
              {"tpot_inputs_built_ms", OrNull(graph.tpot_built_ms)},
              {"tpot_pipelined_ms", OrNull(graph.tpot_pipelined_ms)},
              {"pipelined_tokens_equal", OrNull(graph.pipelined_tokens_equal)},
              {"tok_s", batch / (graph.tpot_ms * 1e-3)},
              {"floor_ms", floor_ms},
              {"floor_fraction", floor_ms / graph.tpot_ms},
              {"achieved_gbs", bytes.Of(batch) / (graph.tpot_ms * 1e-3) / 1e9},
              {"graph_replayed", graph.graph_replayed}};
}

void AddEagerFigures(const DecodeResult& eager, const DecodeResult& graph, Json& row) {
  size_t same = 0;
  for (size_t k = 0; k < eager.tokens.size() && k < graph.tokens.size(); ++k) {
    same += eager.tokens[k] == graph.tokens[k];
  }
  row["eager_tpot_ms"] = eager.tpot_ms;
  row["graph_speedup"] = eager.tpot_ms / graph.tpot_ms;
  row["greedy_tokens_equal_eager"] =
      graph.tokens.empty() ? 0.0 : static_cast<double>(same) / graph.tokens.size();
}

Json ConfigJson(const ModelConfig& c) {
  return Json{{"vocab", c.vocab_size},          {"hidden", c.hidden_size},
              {"ffn", c.intermediate_size},     {"layers", c.num_layers},
              {"heads", c.num_heads},           {"kv_heads", c.num_kv_heads},
              {"head_dim", c.head_dim},         {"rope_theta", c.rope_theta},
              {"llama3_rope_scaling", c.rope_scaling.has_value()},
              {"tied", c.tie_word_embeddings}};
}

void AddTelemetry(const TelemetrySummary& gpu, const std::string& prefix, Json& row) {
  row[prefix + "gpu_samples"] = gpu.samples;
  row[prefix + "gpu_sm_mhz_median"] = gpu.sm_mhz_median;
  row[prefix + "gpu_sm_mhz_min"] = gpu.sm_mhz_min;
  row[prefix + "gpu_sm_mhz_max"] = gpu.sm_mhz_max;
  row[prefix + "gpu_power_w_median"] = gpu.power_w_median;
  row[prefix + "gpu_power_capped_fraction"] = gpu.power_capped_fraction;
  row[prefix + "gpu_thermal_fraction"] = gpu.thermal_fraction;
}

namespace {

// "<label>:  key ms (eager ms)  ..." for one of a model's maps of timings (ttft_ms, mixed_ms).
void PrintTimings(const std::string& name, const Json& m, const char* key, const char* eager_key,
                  const char* label, const char* item) {
  if (!m.contains(key)) return;
  std::printf("%-14s %s:", name.c_str(), label);
  for (const auto& [k, ms] : m[key].items()) {
    std::printf("  %s%s %.2f ms", item, k.c_str(), ms.get<double>());
    if (m.contains(eager_key) && m[eager_key].contains(k)) {
      std::printf(" (eager %.2f)", m[eager_key][k].get<double>());
    }
  }
  std::printf("\n");
}

}  // namespace

void PrintTable(const Json& models) {
  std::printf("\n%-14s %5s %10s %10s %8s %11s %9s %7s %7s %10s %7s %6s\n", "model", "batch",
              "tpot_ms", "built_ms", "pipe_ms", "tok/s", "floor_ms", "floor%", "GB/s", "eager_ms",
              "graphx", "match");
  for (const auto& [name, m] : models.items()) {
    if (!m.contains("decode")) continue;
    for (const Json& r : m["decode"]) {
      std::printf("%-14s %5d %10.3f %10s %8s %11.1f %9.3f %6.1f%% %7.0f %10s %7s %6s\n",
                  name.c_str(), r["batch"].get<int>(), r["tpot_ms"].get<double>(),
                  Cell(r, "tpot_inputs_built_ms", 3).c_str(),
                  Cell(r, "tpot_pipelined_ms", 3).c_str(), r["tok_s"].get<double>(),
                  r["floor_ms"].get<double>(), 100.0 * r["floor_fraction"].get<double>(),
                  r.value("achieved_gbs", 0.0), Cell(r, "eager_tpot_ms", 3).c_str(),
                  Cell(r, "graph_speedup", 2).c_str(),
                  Cell(r, "greedy_tokens_equal_eager", 3).c_str());
    }
    PrintTimings(name, m, "ttft_ms", "ttft_eager_ms", "TTFT batch 1", "prompt ");
    PrintTimings(name, m, "mixed_ms", "mixed_eager_ms", "mixed step (decode rows + prompt)", "");
  }
}

}  // namespace rtgen::tools
