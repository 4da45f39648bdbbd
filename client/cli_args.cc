#include "client/cli_args.h"

#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rtgen {
namespace {

// Flags that take no value.
const std::set<std::string>& Switches() {
  static const std::set<std::string> kSwitches = {"chat", "ignore-eos", "keep-special-tokens",
                                                   "help", "tls"};
  return kSwitches;
}

// The flags `command` takes, the common ones included; null for an unknown subcommand.
const std::set<std::string>* FlagsOf(const std::string& command) {
  static const std::map<std::string, std::set<std::string>> kFlags = [] {
    const std::set<std::string> common = {"target",   "tls",        "tls-ca",
                                          "tls-cert", "tls-key",    "auth-token", "help"};
    std::map<std::string, std::set<std::string>> flags = {
        {"generate",
         {"prompt", "chat", "system", "max-tokens", "temperature", "seed", "top-k", "top-p",
          "min-p", "repetition-penalty", "presence-penalty", "frequency-penalty", "stop",
          "ignore-eos", "keep-special-tokens", "logprobs", "priority", "request-id",
          "timeout"}},
        {"health", {"service"}},
        {"tokenize", {"prompt", "chat", "system"}},
        {"info", {}},
        {"load", {}},
        {"help", {}},
        {"--help", {}},
    };
    for (auto& [name, set] : flags) set.insert(common.begin(), common.end());
    return flags;
  }();
  auto it = kFlags.find(command);
  return it == kFlags.end() ? nullptr : &it->second;
}

}  // namespace

std::optional<std::string> CliArgs::Get(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second.back();
}

bool CliArgs::Switch(const std::string& name) const { return Get(name) == "true"; }

std::optional<CliArgs> ParseCliArgs(int argc, const char* const* argv, std::string* error) {
  CliArgs args;
  if (argc < 2) {
    *error = "missing subcommand";
    return std::nullopt;
  }
  args.command = argv[1];
  const std::set<std::string>* known = FlagsOf(args.command);
  if (known == nullptr) {
    *error = absl::StrCat("unknown subcommand '", args.command, "'");
    return std::nullopt;
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      *error = absl::StrCat("unexpected argument '", arg, "'");
      return std::nullopt;
    }
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (known->count(name) == 0) {
      *error = absl::StrCat("unknown flag --", name, " for ", args.command);
      return std::nullopt;
    }
    const bool is_switch = Switches().count(name) > 0;
    if (eq != std::string::npos) {
      std::string value = arg.substr(eq + 1);
      if (is_switch) {
        if (value == "1") value = "true";
        if (value == "0") value = "false";
        if (value != "true" && value != "false") {
          *error = absl::StrCat("--", name, " takes true or false, got '", value, "'");
          return std::nullopt;
        }
      }
      args.values[name].push_back(value);
    } else if (is_switch) {
      args.values[name].push_back("true");
    } else if (i + 1 < argc) {
      args.values[name].push_back(argv[++i]);
    } else {
      *error = absl::StrCat("--", name, " needs a value");
      return std::nullopt;
    }
  }
  // Flags that mean nothing without another: refused rather than dropped.
  if (args.Has("system") && !args.Switch("chat")) {
    *error = "--system needs --chat (a system message is a chat message)";
    return std::nullopt;
  }
  if (auto timeout = args.Get("timeout")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*timeout, &seconds) || !(seconds > 0) || std::isinf(seconds)) {
      *error = absl::StrCat("--timeout must be a positive number of seconds, got '", *timeout,
                            "'");
      return std::nullopt;
    }
  }
  if (auto target = args.Get("target")) {
    if (std::string target_error = TargetError(*target); !target_error.empty()) {
      *error = std::move(target_error);
      return std::nullopt;
    }
  }
  return args;
}

double GenerateTimeoutSeconds(const CliArgs& args) {
  double seconds = kDefaultGenerateTimeoutS;
  if (auto timeout = args.Get("timeout")) {
    if (!absl::SimpleAtod(*timeout, &seconds)) seconds = kDefaultGenerateTimeoutS;  // refused
  }
  return seconds;
}

std::string TargetError(const std::string& target) {
  if (target.empty()) return "--target must be HOST:PORT, got ''";
  // gRPC's resolver takes a numeric port modulo 65536: localhost:99999 dialled port 34463.
  const size_t colon = target.rfind(':');
  const std::string port = colon == std::string::npos ? "" : target.substr(colon + 1);
  int64_t value = 0;
  if (!absl::StartsWith(target, "unix:") && !port.empty() &&
      port.find_first_not_of("0123456789") == std::string::npos &&
      (!absl::SimpleAtoi(port, &value) || value < 1 || value > 65535)) {
    return absl::StrCat("--target port must be within [1, 65535], got '", target, "'");
  }
  return "";
}

}  // namespace rtgen
