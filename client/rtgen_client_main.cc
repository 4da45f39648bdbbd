// rtgen-client: a command-line client for rtgen.v1.Inference.
//
//   rtgen-client generate --target HOST:PORT --prompt TEXT [--chat] [--max-tokens N]
//                         [--temperature T] [--seed S] [--top-k K] [--top-p P] [--min-p P]
//                         [--stop S]... [--ignore-eos] [--keep-special-tokens]
//                         [--timeout SECONDS (600)] [--logprobs N]
//                         (text on stdout; with --logprobs each token's log-probability and top
//                         N alternatives on stderr, one line a token)
//   rtgen-client health   --target HOST:PORT [--service NAME]   (exit 0 when SERVING)
//   rtgen-client tokenize --target HOST:PORT --prompt TEXT [--chat]
//   rtgen-client info     --target HOST:PORT
//   rtgen-client load     --target HOST:PORT
//
// Every subcommand also takes [--tls] [--tls-ca PEM] [--tls-cert PEM --tls-key PEM] (TLS,
// mutual TLS) and [--auth-token TOKEN] (default: the RTGEN_AUTH_TOKEN environment variable).
//
// Exit status: 0 success, 1 RPC failure (or not SERVING), 2 bad usage.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "client/inference_client.h"

namespace rtgen {
namespace {

constexpr int kUsageError = 2;
constexpr int kRpcError = 1;

constexpr char kUsage[] =
    "usage: rtgen-client <generate|health|tokenize|info|load> --target HOST:PORT [options]\n"
    "  generate --prompt TEXT [--chat] [--system TEXT] [--max-tokens N] [--temperature T]\n"
    "           [--seed S] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
    "           [--presence-penalty P] [--frequency-penalty F] [--stop S]... [--ignore-eos]\n"
    "           [--keep-special-tokens] [--logprobs N] [--priority N] [--request-id ID]\n"
    "           [--timeout SECONDS]\n"
    "           (--keep-special-tokens: special tokens' text, e.g. <|im_end|>, in the text)\n"
    "           (--timeout: the whole stream's deadline, default 600)\n"
    "           (--logprobs: a line a token on stderr: [logprob token=ID LP ID:LP...])\n"
    "  health [--service NAME]      exit 0 when SERVING\n"
    "  tokenize --prompt TEXT [--chat] [--system TEXT]   (--system needs --chat)\n"
    "  info | load\n"
    "common: [--tls] [--tls-ca PEM] [--tls-cert PEM --tls-key PEM]\n"
    "        [--auth-token TOKEN]   (default: $RTGEN_AUTH_TOKEN)\n";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "rtgen-client: %s\n%s", message.c_str(), kUsage);
  return kUsageError;
}

int RpcError(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "rtgen-client: %s failed: %s: %s\n", what.c_str(),
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return kRpcError;
}

// Parses numeric flag `name` into `out` when present; false (after printing) when malformed.
template <typename T>
bool NumberFlag(const CliArgs& args, const std::string& name, std::optional<T>* out) {
  const std::optional<std::string> text = args.Get(name);
  if (!text.has_value()) return true;
  T value{};
  bool ok = false;
  if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    ok = absl::SimpleAtod(*text, &d);
    value = static_cast<T>(d);
  } else {
    ok = absl::SimpleAtoi(*text, &value);
  }
  if (!ok) {
    std::fprintf(stderr, "rtgen-client: --%s: '%s' is not a valid number\n", name.c_str(),
                 text->c_str());
    return false;
  }
  *out = value;
  return true;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) {
    return message.DebugString();
  }
  return out;
}

void SetChatOrPrompt(const CliArgs& args, v1::ChatMessages* messages, std::string* prompt) {
  const std::string text = args.Get("prompt").value_or("");
  if (!args.Switch("chat")) {
    *prompt = text;
    return;
  }
  if (auto system = args.Get("system")) {
    v1::ChatMessage* m = messages->add_messages();
    m->set_role("system");
    m->set_content(*system);
  }
  v1::ChatMessage* m = messages->add_messages();
  m->set_role("user");
  m->set_content(text);
}

int Generate(const CliArgs& args, InferenceClient& client) {
  if (!args.Has("prompt")) return UsageError("generate needs --prompt");
  v1::GenerateRequest request;
  if (args.Switch("chat")) {
    std::string unused;
    SetChatOrPrompt(args, request.mutable_messages(), &unused);
  } else {
    SetChatOrPrompt(args, nullptr, request.mutable_prompt());
  }
  std::optional<int32_t> max_tokens, top_k, logprobs, priority;
  std::optional<float> temperature, top_p, min_p, repetition, presence, frequency;
  std::optional<uint64_t> seed;
  if (!NumberFlag(args, "max-tokens", &max_tokens) || !NumberFlag(args, "top-k", &top_k) ||
      !NumberFlag(args, "logprobs", &logprobs) || !NumberFlag(args, "priority", &priority) ||
      !NumberFlag(args, "temperature", &temperature) || !NumberFlag(args, "top-p", &top_p) ||
      !NumberFlag(args, "min-p", &min_p) ||
      !NumberFlag(args, "repetition-penalty", &repetition) ||
      !NumberFlag(args, "presence-penalty", &presence) ||
      !NumberFlag(args, "frequency-penalty", &frequency) || !NumberFlag(args, "seed", &seed)) {
    return kUsageError;
  }
  v1::SamplingParams* sampling = request.mutable_sampling();
  if (temperature) sampling->set_temperature(*temperature);
  if (top_k) sampling->set_top_k(*top_k);
  if (top_p) sampling->set_top_p(*top_p);
  if (min_p) sampling->set_min_p(*min_p);
  if (repetition) sampling->set_repetition_penalty(*repetition);
  if (presence) sampling->set_presence_penalty(*presence);
  if (frequency) sampling->set_frequency_penalty(*frequency);
  if (seed) sampling->set_seed(*seed);
  v1::StoppingParams* stopping = request.mutable_stopping();
  if (max_tokens) stopping->set_max_tokens(*max_tokens);
  if (auto it = args.values.find("stop"); it != args.values.end()) {
    for (const std::string& s : it->second) stopping->add_stop(s);
  }
  stopping->set_ignore_eos(args.Switch("ignore-eos"));
  if (args.Switch("keep-special-tokens")) request.set_skip_special_tokens(false);
  if (logprobs) request.set_logprobs(*logprobs);
  if (priority) request.set_priority(*priority);
  if (auto id = args.Get("request-id")) request.set_request_id(*id);

  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(GenerateTimeoutSeconds(args))));
  bool wrote = false;
  absl::StatusOr<GenerateResult> result = client.Generate(
      request,
      [&wrote](const v1::GenerateResponse& response) {
        std::fwrite(response.text().data(), 1, response.text().size(), stdout);
        std::fflush(stdout);
        wrote = wrote || !response.text().empty();
        // --logprobs: one line a token on stderr (stdout keeps the text alone).
        for (const v1::TokenLogprobs& t : response.logprobs()) {
          std::string line = absl::StrFormat("[logprob token=%d %.4f", t.token_id(), t.logprob());
          for (const v1::TokenLogprob& alt : t.top()) {
            absl::StrAppendFormat(&line, " %d:%.4f", alt.token_id(), alt.logprob());
          }
          std::fprintf(stderr, "%s]\n", line.c_str());
        }
      },
      &context);
  if (!result.ok()) {
    if (wrote) std::fputc('\n', stdout);  // end the streamed line; nothing else on stdout
    return RpcError("generate", result.status());
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const v1::Usage& u = result->usage;
  const double decode_s = u.total_time_seconds() - u.time_to_first_token_seconds();
  const double tokens_per_s =
      u.generated_tokens() > 1 && decode_s > 0 ? (u.generated_tokens() - 1) / decode_s : 0.0;
  std::string finish = v1::FinishReason_Name(result->finish_reason);
  if (finish.rfind("FINISH_REASON_", 0) == 0) finish = finish.substr(14);
  std::fprintf(stderr,
               "[finish=%s prompt_tokens=%d cached_tokens=%d generated_tokens=%d "
               "queue=%.1fms ttft=%.1fms total=%.1fms decode=%.1f tok/s]\n",
               absl::AsciiStrToLower(finish).c_str(), u.prompt_tokens(), u.cached_tokens(),
               u.generated_tokens(), u.queue_time_seconds() * 1e3,
               u.time_to_first_token_seconds() * 1e3, u.total_time_seconds() * 1e3,
               tokens_per_s);
  return 0;
}

int Health(const CliArgs& args, InferenceClient& client) {
  absl::StatusOr<HealthStatus> status = client.Health(args.Get("service").value_or(""));
  if (!status.ok()) return RpcError("health", status.status());
  std::printf("%s\n", HealthStatusName(*status));
  return *status == HealthStatus::kServing ? 0 : kRpcError;
}

int Tokenize(const CliArgs& args, InferenceClient& client) {
  if (!args.Has("prompt")) return UsageError("tokenize needs --prompt");
  v1::TokenizeRequest request;
  if (args.Switch("chat")) {
    std::string unused;
    SetChatOrPrompt(args, request.mutable_messages(), &unused);
  } else {
    SetChatOrPrompt(args, nullptr, request.mutable_prompt());
  }
  absl::StatusOr<v1::TokenizeResponse> response = client.Tokenize(request);
  if (!response.ok()) return RpcError("tokenize", response.status());
  std::cout << ToJson(*response) << "\n";
  return 0;
}

int Run(int argc, char** argv) {
  std::string error;
  std::optional<CliArgs> args = ParseCliArgs(argc, argv, &error);
  if (!args.has_value()) return UsageError(error);
  if (args->command == "help" || args->command == "--help" || args->Switch("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string target = args->Get("target").value_or("localhost:50051");
  ConnectOptions options;
  options.tls = args->Switch("tls");
  options.tls_ca_path = args->Get("tls-ca").value_or("");
  options.tls_cert_path = args->Get("tls-cert").value_or("");
  options.tls_key_path = args->Get("tls-key").value_or("");
  if (auto token = args->Get("auth-token")) {
    options.auth_token = *token;
  } else if (const char* env = std::getenv("RTGEN_AUTH_TOKEN"); env != nullptr) {
    options.auth_token = env;
  }
  absl::StatusOr<std::unique_ptr<InferenceClient>> connected =
      InferenceClient::Connect(target, options);
  if (!connected.ok()) return UsageError(std::string(connected.status().message()));
  std::unique_ptr<InferenceClient>& client = *connected;
  const std::string& command = args->command;
  if (command == "generate") return Generate(*args, *client);
  if (command == "health") return Health(*args, *client);
  if (command == "tokenize") return Tokenize(*args, *client);
  if (command == "info") {
    absl::StatusOr<v1::ModelInfo> info = client->Info();
    if (!info.ok()) return RpcError("info", info.status());
    std::cout << ToJson(*info) << "\n";
    return 0;
  }
  if (command == "load") {
    absl::StatusOr<v1::Load> load = client->GetLoad();
    if (!load.ok()) return RpcError("load", load.status());
    std::cout << ToJson(*load) << "\n";
    return 0;
  }
  return UsageError(absl::StrCat("unknown subcommand '", command, "'"));
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Run(argc, argv); }
