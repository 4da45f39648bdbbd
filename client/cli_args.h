#pragma once
// rtgen-client's command line: a subcommand, then --name value / --name=value flags (repeated
// flags keep every value in order). Each subcommand takes its own flags and the common ones; an
// unknown flag is an error (a misspelt --max_tokens was silently dropped), and a switch takes
// --name, --name=true or --name=false (--tls=false turned TLS on).

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rtgen {

struct CliArgs {
  std::string command;
  std::map<std::string, std::vector<std::string>> values;  // switches: "true" or "false"

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  // The last value of `name`, if given.
  std::optional<std::string> Get(const std::string& name) const;
  // A switch's value: false when not given.
  bool Switch(const std::string& name) const;
};

// Parses argv[1..]; nullopt with *error set (naming the subcommand or flag) when malformed, and
// when a flag needs another (--system needs --chat), --timeout is not a positive number, or
// --target's numeric port is outside [1, 65535].
std::optional<CliArgs> ParseCliArgs(int argc, const char* const* argv, std::string* error);

// generate's deadline for the whole stream: --timeout (checked positive and finite by
// ParseCliArgs) or, when not given, kDefaultGenerateTimeoutS. Without a default a stream over a
// half-open connection (a replica that died mid-stream) or from a stalled engine never returned.
inline constexpr double kDefaultGenerateTimeoutS = 600;
double GenerateTimeoutSeconds(const CliArgs& args);

// What is wrong with a --target value ("" when nothing): empty, or a numeric port outside
// [1, 65535] (unix: paths and named ports pass). rtgen-client and rtgen-bench both check it.
std::string TargetError(const std::string& target);

}  // namespace rtgen
