// rtgen-bench: a gRPC load generator for rtgen-server.
//
//   rtgen-bench --target HOST:PORT [--concurrency N | --request-rate R]
//               [--num-requests N] [--duration S] [--warmup N]
//               [--input-len N] [--input-len-range R] [--output-len N] [--output-len-range R]
//               [--shared-prefix-len N] [--prompts FILE.jsonl]
//               [--slo-ttft-ms MS] [--slo-tpot-ms MS] [--output FILE.json]
//               [--sweep-concurrency 1,2,4,... [--requests-per-level K] [--csv FILE.csv]
//                [--plot FILE.png]]
//               [--seed S] [--timeout S] [--wait-ready S] [--no-progress]
//
// Exit status: 0 when every measured request succeeded (and there was one), 1 when some failed,
// none was measured or the server is unreachable, 2 on bad usage.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/bench/bench_report.h"
#include "client/bench/latency_plot.h"
#include "client/bench/load_runner.h"
#include "client/bench/prompt_source.h"
#include "client/bench/report_format.h"
#include "client/cli_args.h"
#include "client/inference_client.h"

namespace rtgen::bench {
namespace {

constexpr int kFailed = 1;
constexpr int kUsageError = 2;

constexpr char kUsage[] =
    "usage: rtgen-bench --target HOST:PORT [--concurrency N | --request-rate R]\n"
    "  [--num-requests N] [--duration S] [--warmup N] [--input-len N] [--input-len-range R]\n"
    "  [--output-len N] [--output-len-range R] [--shared-prefix-len N] [--prompts FILE.jsonl]\n"
    "  [--slo-ttft-ms MS] [--slo-tpot-ms MS] [--output FILE.json] [--seed S] [--timeout S]\n"
    "  [--wait-ready S] [--no-progress]\n"
    "  [--sweep-concurrency 1,2,4,8 [--requests-per-level K] [--csv FILE] [--plot FILE.png]]\n";

const char* const kValueFlags[] = {
    "target", "concurrency", "request-rate", "num-requests", "duration", "warmup", "input-len",
    "input-len-range", "output-len", "output-len-range", "shared-prefix-len", "prompts",
    "slo-ttft-ms", "slo-tpot-ms", "output", "sweep-concurrency", "requests-per-level", "csv",
    "plot", "seed", "timeout", "wait-ready"};

struct Flags {
  std::map<std::string, std::string> values;
  bool no_progress = false;
  bool help = false;
  std::optional<std::string> Get(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
};

// One level of --sweep-concurrency: `level` requests in flight, and requests_per_level x level
// requests when --requests-per-level is given.
LoadConfig LevelLoad(const LoadConfig& load, int level, int requests_per_level) {
  LoadConfig level_load = load;
  level_load.concurrency = level;
  if (requests_per_level > 0) level_load.num_requests = requests_per_level * level;
  return level_load;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-progress") {
      flags.no_progress = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    arg = arg.substr(2);
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", arg, " needs a value"));
    }
    bool known = false;
    for (const char* name : kValueFlags) known = known || arg == name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", arg));
    // Given twice, the last one won silently (--num-requests 5 --num-requests 0).
    if (!flags.values.emplace(arg, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("--", arg, " is given twice"));
    }
  }
  return flags;
}

// Reads number flag `name` into `out` when present.
template <typename T>
absl::Status NumberFlag(const Flags& flags, const std::string& name, T* out) {
  const std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return absl::OkStatus();
  bool ok;
  if constexpr (std::is_floating_point_v<T>) {
    ok = absl::SimpleAtod(*text, out);
  } else {
    ok = absl::SimpleAtoi(*text, out);
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("--", name, ": not a number: ", *text));
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path);
  out << text;
  out.close();  // a short file is written only here: its failure shows after the close
  if (!out) return absl::InternalError(absl::StrCat("--", flag, ": cannot write ", path));
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  absl::StatusOr<Flags> parsed = ParseFlags(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "rtgen-bench: %s\n%s", std::string(parsed.status().message()).c_str(),
                 kUsage);
    return kUsageError;
  }
  const Flags& flags = *parsed;
  if (flags.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string target = flags.Get("target").value_or("localhost:50051");
  WorkloadConfig workload;
  LoadConfig load;
  SloConfig slo;
  double rate = 0, slo_ttft = 0, slo_tpot = 0, wait_ready_s = 0;
  int concurrency = 0;
  int requests_per_level = 0;
  std::vector<int> sweep;
  absl::Status status = absl::OkStatus();
  for (absl::Status s :
       {NumberFlag(flags, "concurrency", &concurrency),
        NumberFlag(flags, "request-rate", &rate), NumberFlag(flags, "num-requests", &load.num_requests),
        NumberFlag(flags, "duration", &load.duration_s), NumberFlag(flags, "warmup", &load.warmup),
        NumberFlag(flags, "input-len", &workload.input_len),
        NumberFlag(flags, "input-len-range", &workload.input_len_range),
        NumberFlag(flags, "output-len", &workload.output_len),
        NumberFlag(flags, "output-len-range", &workload.output_len_range),
        NumberFlag(flags, "shared-prefix-len", &workload.shared_prefix_len),
        NumberFlag(flags, "slo-ttft-ms", &slo_ttft), NumberFlag(flags, "slo-tpot-ms", &slo_tpot),
        NumberFlag(flags, "seed", &workload.seed), NumberFlag(flags, "timeout", &load.request_timeout_s),
        NumberFlag(flags, "wait-ready", &wait_ready_s),
        NumberFlag(flags, "requests-per-level", &requests_per_level)}) {
    status.Update(s);
  }
  if (flags.Get("request-rate")) load.request_rate = rate;
  if (flags.Get("concurrency")) load.concurrency = concurrency;
  if (flags.Get("slo-ttft-ms")) slo.ttft_ms = slo_ttft;
  if (flags.Get("slo-tpot-ms")) slo.tpot_ms = slo_tpot;
  // A NaN bound counted every request within it, a negative one none.
  for (const auto& [name, bound] : {std::pair{"slo-ttft-ms", slo.ttft_ms},
                                    std::pair{"slo-tpot-ms", slo.tpot_ms}}) {
    if (bound.has_value() && !(*bound > 0 && std::isfinite(*bound))) {
      status.Update(absl::InvalidArgumentError(
          absl::StrCat("--", name, ": must be a positive number of milliseconds")));
    }
  }
  workload.prompts_file = flags.Get("prompts").value_or("");
  load.seed = workload.seed;
  load.progress = !flags.no_progress;
  if (auto list = flags.Get("sweep-concurrency")) {
    for (absl::string_view item : absl::StrSplit(*list, ',', absl::SkipEmpty())) {
      int level = 0;
      if (!absl::SimpleAtoi(item, &level) || level < 1) {
        status.Update(absl::InvalidArgumentError(
            absl::StrCat("--sweep-concurrency: not a positive integer: ", item)));
      }
      sweep.push_back(level);
    }
    // "," or "" parsed to no level and ran one closed loop at concurrency 1.
    if (sweep.empty()) {
      status.Update(absl::InvalidArgumentError("--sweep-concurrency: no level given"));
    }
    if (load.request_rate.has_value()) {
      status.Update(absl::InvalidArgumentError("--sweep-concurrency and --request-rate conflict"));
    }
    // Each level sets the concurrency: a --concurrency beside it was silently ignored.
    if (flags.Get("concurrency")) {
      status.Update(absl::InvalidArgumentError("--sweep-concurrency and --concurrency conflict"));
    }
  }
  // A prompts file sets each prompt (and, where a line has it, its max_tokens): these were
  // silently ignored beside it.
  if (!workload.prompts_file.empty()) {
    for (const char* name : {"input-len", "input-len-range", "output-len-range"}) {
      if (flags.Get(name)) {
        status.Update(absl::InvalidArgumentError(
            absl::StrCat("--", name, " applies to synthetic prompts, not to --prompts")));
      }
    }
  }
  if (flags.Get("plot") && sweep.empty()) {
    status.Update(absl::InvalidArgumentError("--plot needs --sweep-concurrency"));
  }
  if (flags.Get("csv") && sweep.empty()) {
    status.Update(absl::InvalidArgumentError("--csv needs --sweep-concurrency"));
  }
  // NaN would wait forever (absl::Seconds(NaN) is infinite), a negative value not at all.
  if (!(wait_ready_s >= 0) || std::isinf(wait_ready_s)) {
    status.Update(absl::InvalidArgumentError("--wait-ready: must be a number of seconds >= 0"));
  }
  if (flags.Get("requests-per-level")) {
    if (sweep.empty()) {
      status.Update(absl::InvalidArgumentError("--requests-per-level needs --sweep-concurrency"));
    } else if (requests_per_level < 1) {
      status.Update(absl::InvalidArgumentError("--requests-per-level: must be at least 1"));
    }
    // Each level's count is requests-per-level x its concurrency: --num-requests was dropped.
    if (flags.Get("num-requests")) {
      status.Update(
          absl::InvalidArgumentError("--requests-per-level and --num-requests conflict"));
    }
    // The largest level's request count must fit num_requests (an int).
    const int level = sweep.empty() ? 1 : *std::max_element(sweep.begin(), sweep.end());
    if (requests_per_level >= 1 &&
        int64_t{requests_per_level} * level > std::numeric_limits<int>::max()) {
      status.Update(absl::InvalidArgumentError(absl::StrCat(
          "--requests-per-level: ", requests_per_level, " x concurrency ", level,
          " requests is past ", std::numeric_limits<int>::max())));
    }
  }
  if (std::string error = TargetError(target); !error.empty()) {
    status.Update(absl::InvalidArgumentError(error));
  }
  // The load and the lengths before connecting: a bad one otherwise showed only after
  // GetModelInfo answered (after --wait-ready, or as "GetModelInfo failed", exit 1).
  if (status.ok()) {
    status.Update(PromptSource::CheckConfig(workload));
    if (sweep.empty()) status.Update(CheckLoadConfig(load));
    for (int level : sweep) {
      status.Update(CheckLoadConfig(LevelLoad(load, level, requests_per_level)));
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "rtgen-bench: %s\n%s", std::string(status.message()).c_str(), kUsage);
    return kUsageError;
  }

  std::unique_ptr<InferenceClient> client = InferenceClient::Connect(target);
  const absl::Time ready_deadline = absl::Now() + absl::Seconds(wait_ready_s);
  absl::StatusOr<v1::ModelInfo> info = client->Info();
  while (!info.ok() && absl::Now() < ready_deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    info = client->Info();
  }
  if (!info.ok()) {
    std::fprintf(stderr, "rtgen-bench: GetModelInfo on %s failed: %s\n", target.c_str(),
                 info.status().ToString().c_str());
    return kFailed;
  }
  std::fprintf(stderr, "rtgen-bench: %s (%s backend, vocab %d, context %d) at %s\n",
               info->name().c_str(), info->backend().c_str(), info->vocab_size(),
               info->context_length(), target.c_str());
  const TokenRange range = TokenRangeForVocab(
      info->vocab_size(),
      info->has_bos_token_id() ? std::optional<int32_t>(info->bos_token_id()) : std::nullopt,
      info->has_eos_token_id() ? std::optional<int32_t>(info->eos_token_id()) : std::nullopt);
  absl::StatusOr<PromptSource> prompts = PromptSource::Create(workload, range);
  if (!prompts.ok()) {
    std::fprintf(stderr, "rtgen-bench: %s\n", std::string(prompts.status().message()).c_str());
    return kUsageError;
  }
  // Synthetic requests past the server's context would each fail with INVALID_ARGUMENT.
  if (const std::optional<int> tokens = prompts->LongestSyntheticRequest();
      tokens.has_value() && *tokens > info->context_length()) {
    std::fprintf(stderr,
                 "rtgen-bench: --input-len / --output-len: the longest request is %d tokens "
                 "(with their ranges), past the server's context of %d\n",
                 *tokens, info->context_length());
    return kUsageError;
  }

  bool any_failed = false;
  if (sweep.empty()) {
    absl::StatusOr<LoadResult> result = RunLoad(load, *client, *prompts);
    if (!result.ok()) {
      std::fprintf(stderr, "rtgen-bench: %s\n", std::string(result.status().message()).c_str());
      return kUsageError;
    }
    const BenchReport report = ComputeReport(result->records, result->duration_s, slo);
    std::fputs(FormatReportTable(report).c_str(), stdout);
    any_failed = !RunPassed(report);
    if (report.num_requests == 0) std::fputs("rtgen-bench: no request was measured\n", stderr);
    if (auto path = flags.Get("output")) {
      nlohmann::json json = ReportToJson(report);
      json["concurrency"] = InFlightLimit(load);
      if (load.request_rate.has_value()) {  // JSON has no infinity: nlohmann wrote null
        if (std::isinf(*load.request_rate)) {
          json["request_rate"] = "inf";
        } else {
          json["request_rate"] = *load.request_rate;
        }
      }
      // The workload as run: a prompts file's prompts, or the synthetic lengths with their
      // ranges (input_len was written beside a prompts file it did not apply to).
      if (workload.prompts_file.empty()) {
        json["input_len"] = workload.input_len;
        json["input_len_range"] = workload.input_len_range;
        json["shared_prefix_len"] = workload.shared_prefix_len;
      } else {
        json["prompts_file"] = workload.prompts_file;
      }
      json["output_len"] = workload.output_len;
      json["output_len_range"] = workload.output_len_range;
      json["model"] = info->name();
      json["backend"] = info->backend();
      absl::Status written = WriteFile(*path, json.dump(2) + "\n", "output");
      if (!written.ok()) {
        std::fprintf(stderr, "rtgen-bench: %s\n", std::string(written.message()).c_str());
        return kFailed;
      }
    }
    return any_failed ? kFailed : 0;
  }

  const std::string output = flags.Get("output").value_or("");
  std::string csv = flags.Get("csv").value_or("");
  if (csv.empty() && !output.empty()) {
    csv = absl::EndsWith(output, ".json") ? output.substr(0, output.size() - 5) + ".csv"
                                           : output + ".csv";
  }
  if (csv.empty() && flags.Get("plot")) csv = *flags.Get("plot") + ".csv";
  // Rewrites the JSON and CSV after every level, so a long sweep cut short keeps its rows.
  auto write_rows = [&](const std::vector<SweepRow>& rows) {
    absl::Status s = absl::OkStatus();
    if (!output.empty()) s.Update(WriteFile(output, SweepToJson(rows).dump(2) + "\n", "output"));
    if (!csv.empty()) s.Update(WriteFile(csv, SweepToCsv(rows), "csv"));
    return s;
  };
  std::vector<SweepRow> rows;
  for (int level : sweep) {
    absl::StatusOr<LoadResult> result =
        RunLoad(LevelLoad(load, level, requests_per_level), *client, *prompts);
    if (!result.ok()) {
      std::fprintf(stderr, "rtgen-bench: %s\n", std::string(result.status().message()).c_str());
      return kUsageError;
    }
    rows.push_back({level, ComputeReport(result->records, result->duration_s, slo)});
    any_failed = any_failed || !RunPassed(rows.back().report);
    if (rows.back().report.num_requests == 0) {
      std::fprintf(stderr, "rtgen-bench: no request was measured at concurrency %d\n", level);
    }
    if (absl::Status s = write_rows(rows); !s.ok()) {
      std::fprintf(stderr, "rtgen-bench: %s\n", std::string(s.message()).c_str());
      return kFailed;
    }
  }
  std::fputs(FormatSweepTable(rows).c_str(), stdout);
  if (flags.Get("plot")) {
    if (absl::Status s = DrawLatencyPlot(csv, *flags.Get("plot")); !s.ok()) {
      std::fprintf(stderr, "rtgen-bench: %s\n", std::string(s.message()).c_str());
      return kFailed;
    }
  }
  return any_failed ? kFailed : 0;
}

}  // namespace
}  // namespace rtgen::bench

int main(int argc, char** argv) { return rtgen::bench::Run(argc, argv); }
