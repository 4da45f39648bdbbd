// rtgen-server: flags → ServerConfig → Server. Serves until SIGINT/SIGTERM, then drains.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "engine/common/flag_names.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/logging.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/termination_signal.h"

ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf",
          "GGUF file, or a Hugging Face directory (config.json, *.safetensors, tokenizer.json)");
ABSL_FLAG(std::string, backend, "auto",
          "auto (cuda when built in and a GPU is visible, else cpu) | cpu | cuda");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to serve gRPC on (IPv6 as :: or [::])");
ABSL_FLAG(int32_t, port, 50051, "gRPC port (0: any free port)");
ABSL_FLAG(int32_t, metrics_port, 9090,
          "Prometheus /metrics port (0: any free port; negative: off)");
ABSL_FLAG(std::string, metrics_host, "",
          "address to serve /metrics on (empty: --host's where it is an IP address, 127.0.0.1 for "
          "localhost, else every address, IPv6 and IPv4)");
ABSL_FLAG(int32_t, max_num_seqs, 64, "sequences per engine step");
ABSL_FLAG(int32_t, max_num_batched_tokens, 512, "tokens per engine step");
ABSL_FLAG(int32_t, max_model_len, 2048, "context per request, tokens");
ABSL_FLAG(int32_t, max_waiting, 1024, "queued requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int32_t, num_kv_blocks, 0, "KV cache blocks (0: enough for max-num-seqs contexts)");
ABSL_FLAG(int32_t, block_size, 16, "tokens per KV block");
ABSL_FLAG(bool, enable_prefix_caching, true, "reuse KV blocks of shared prompt prefixes");
ABSL_FLAG(bool, async_scheduling, true,
          "launch the next step while the backend still runs this one (pipelined steps)");
ABSL_FLAG(int32_t, max_penalty_tokens, 4096,
          "CUDA backend: a request whose penalties read more tokens than this (prompt and output "
          "with a repetition penalty, else the output) is sampled by the CPU sampler, 0: always");
ABSL_FLAG(int32_t, threads, 0, "CPU backend threads (0: every core)");
ABSL_FLAG(std::string, cpu_weight_dtype, "native",
          "CPU backend weight storage: native (the file's quantized blocks where it has them, "
          "else bf16) | bf16 | f32");
ABSL_FLAG(std::string, log_level, "info", "trace|debug|info|warn|error|critical|off");
ABSL_FLAG(std::string, log_format, "text", "text | json (one object per line)");
ABSL_FLAG(std::string, latency_buckets, "",
          "latency histogram bounds in seconds, comma separated (default 0.0001 .. 60)");
ABSL_FLAG(int32_t, unhealthy_after_failed_steps, 3,
          "health turns NOT_SERVING (liveness and readiness) after this many engine steps fail in "
          "a row, and SERVING again after one succeeds");
ABSL_FLAG(int32_t, unhealthy_after_stall_s, 120,
          "health turns NOT_SERVING while the engine has work but no step has ended for this "
          "many seconds");
ABSL_FLAG(int32_t, max_connection_age_s, 0,
          "close client connections after this many seconds so they rebalance (0: never)");
ABSL_FLAG(int32_t, max_connection_age_grace_s, -1,
          "seconds a stream may continue after its connection's max age (-1: the age)");
ABSL_FLAG(int32_t, keepalive_time_s, 30,
          "ping a connection after this many seconds without reading from it (0: gRPC's two "
          "hours); clients may ping every 10 s or more");
ABSL_FLAG(int32_t, keepalive_timeout_s, 10,
          "close a connection (cancelling its streams) whose ping is not answered within this "
          "many seconds");
ABSL_FLAG(int32_t, drain_timeout_s, 30, "on SIGTERM, seconds in-flight streams get to finish");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain (with --tls-key: serve TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file of bearer tokens, one per line: calls need 'authorization: Bearer <token>' "
          "(health and reflection exempt)");
ABSL_FLAG(int32_t, max_message_bytes, 4 << 20, "largest request message accepted, bytes");
ABSL_FLAG(int32_t, default_max_tokens, 256,
          "tokens a request may generate when it sets no stopping.max_tokens, within its context "
          "(0: all the context its prompt leaves)");
ABSL_FLAG(int32_t, max_stop_strings, 16, "stop strings per request");
ABSL_FLAG(int32_t, max_stop_string_bytes, 256, "bytes per stop string");
ABSL_FLAG(int32_t, max_stop_token_ids, 256, "stop token ids per request");

namespace {

int Fail(const absl::Status& status) {
  spdlog::critical("{}", status.ToString());
  std::fprintf(stderr, "rtgen-server: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rtgen::BlockTerminationSignals();
  absl::SetProgramUsageMessage("gRPC LLM inference server (rtgen.v1.Inference). Flags may be "
                           "spelled with dashes or underscores (--metrics-port, --metrics_port).");
  // --help lists this file's flags (abseil's default looks for a file named after the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  rtgen::DashedFlagNamesToUnderscores(argc, argv);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {  // [0] is the program
    std::fprintf(stderr, "rtgen-server: unexpected argument '%s' (a model is --model=PATH)\n",
                 positional[1]);
    return 1;
  }
  if (absl::GetFlag(FLAGS_drain_timeout_s) < 0) {
    std::fprintf(stderr, "rtgen-server: drain-timeout-s: must not be negative, got %d\n",
                 absl::GetFlag(FLAGS_drain_timeout_s));
    return 1;
  }

  if (absl::Status s = rtgen::ConfigureLogging(absl::GetFlag(FLAGS_log_level),
                                               absl::GetFlag(FLAGS_log_format));
      !s.ok()) {
    return Fail(s);
  }

  rtgen::ServerConfig config;
  config.model_path = absl::GetFlag(FLAGS_model);
  config.backend.kind = absl::GetFlag(FLAGS_backend);
  config.backend.threads = absl::GetFlag(FLAGS_threads);
  config.backend.cpu_weight_dtype = absl::GetFlag(FLAGS_cpu_weight_dtype);
  config.backend.max_penalty_tokens = absl::GetFlag(FLAGS_max_penalty_tokens);
  config.host = absl::GetFlag(FLAGS_host);
  config.port = absl::GetFlag(FLAGS_port);
  config.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  config.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  config.max_connection_age_s = absl::GetFlag(FLAGS_max_connection_age_s);
  config.engine_health.max_failed_steps = absl::GetFlag(FLAGS_unhealthy_after_failed_steps);
  config.engine_health.max_stall = absl::Seconds(absl::GetFlag(FLAGS_unhealthy_after_stall_s));
  config.max_connection_age_grace_s = absl::GetFlag(FLAGS_max_connection_age_grace_s);
  config.keepalive_time = absl::Seconds(absl::GetFlag(FLAGS_keepalive_time_s));
  config.keepalive_timeout = absl::Seconds(absl::GetFlag(FLAGS_keepalive_timeout_s));
  config.tls.cert_path = absl::GetFlag(FLAGS_tls_cert);
  config.tls.key_path = absl::GetFlag(FLAGS_tls_key);
  config.tls.client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  config.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  config.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  config.default_max_tokens = absl::GetFlag(FLAGS_default_max_tokens);
  config.engine.max_stop_strings = absl::GetFlag(FLAGS_max_stop_strings);
  config.engine.max_stop_string_bytes = absl::GetFlag(FLAGS_max_stop_string_bytes);
  config.engine.max_stop_token_ids = absl::GetFlag(FLAGS_max_stop_token_ids);
  config.engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  config.engine.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  config.engine.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  config.engine.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  config.engine.num_kv_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  config.engine.block_size = absl::GetFlag(FLAGS_block_size);
  config.engine.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  config.engine.async_scheduling = absl::GetFlag(FLAGS_async_scheduling);
  if (const std::string buckets = absl::GetFlag(FLAGS_latency_buckets); !buckets.empty()) {
    absl::StatusOr<std::vector<double>> parsed = rtgen::ParseLatencyBuckets(buckets);
    if (!parsed.ok()) return Fail(parsed.status());
    config.latency_buckets = *std::move(parsed);
  }

  rtgen::WatchTerminationSignals();  // a signal while loading exits at once
  absl::StatusOr<std::unique_ptr<rtgen::Server>> server = rtgen::Server::Start(config);
  if (!server.ok()) return Fail(server.status());

  const int signal_number = rtgen::WaitForDrainSignal();
  spdlog::info("signal {}: shutting down (another one exits at once)", signal_number);
  (*server)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_drain_timeout_s)));
  return 0;
}
