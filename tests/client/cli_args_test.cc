// rtgen-client's command line (client/cli_args.h): flags with a value in either form, repeated
// flags in order, switches with and without a value, and an error naming every malformed part
// (unknown subcommand or flag, a switch given something but true or false, a missing value).

#include "client/cli_args.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rtgen {
namespace {

std::optional<CliArgs> Parse(std::vector<const char*> argv, std::string* error) {
  argv.insert(argv.begin(), "rtgen-client");
  return ParseCliArgs(static_cast<int>(argv.size()), argv.data(), error);
}

TEST(CliArgsTest, TakesValuesInBothFormsAndRepeatedFlagsInOrder) {
  std::string error;
  const auto args = Parse({"generate", "--prompt", "hi there", "--max-tokens=5", "--stop", "a",
                           "--stop=b", "--target", "h:1"},
                          &error);
  ASSERT_TRUE(args.has_value()) << error;
  EXPECT_EQ(args->command, "generate");
  EXPECT_EQ(args->Get("prompt"), "hi there");
  EXPECT_EQ(args->Get("max-tokens"), "5");
  EXPECT_EQ(args->values.at("stop"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(args->Get("target"), "h:1");
  EXPECT_FALSE(args->Get("seed").has_value());
}

TEST(CliArgsTest, SwitchesTakeTrueOrFalse) {
  std::string error;
  auto args = Parse({"generate", "--prompt", "x", "--ignore-eos", "--chat=false", "--tls=0",
                     "--keep-special-tokens"},
                    &error);
  ASSERT_TRUE(args.has_value()) << error;
  EXPECT_TRUE(args->Switch("ignore-eos"));
  EXPECT_TRUE(args->Switch("keep-special-tokens"));
  EXPECT_FALSE(args->Switch("chat"));  // was on: any value counted as given
  EXPECT_FALSE(args->Switch("tls"));
  EXPECT_FALSE(args->Switch("help"));  // not given
  args = Parse({"health", "--tls=true"}, &error);
  ASSERT_TRUE(args.has_value()) << error;
  EXPECT_TRUE(args->Switch("tls"));
}

TEST(CliArgsTest, RefusesMalformedArgumentsByName) {
  struct Case {
    std::vector<const char*> argv;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "missing subcommand"},
           {{"generat"}, "unknown subcommand 'generat'"},
           {{"generate", "--max_tokens", "5"}, "unknown flag --max_tokens for generate"},
           {{"health", "--prompt", "x"}, "unknown flag --prompt for health"},
           {{"generate", "--ignore-eos=maybe"}, "--ignore-eos takes true or false, got 'maybe'"},
           {{"generate", "--prompt"}, "--prompt needs a value"},
           {{"generate", "prompt"}, "unexpected argument 'prompt'"},
           {{"generate", "--prompt", "x", "--system", "s"},
            "--system needs --chat (a system message is a chat message)"},
           {{"tokenize", "--prompt", "x", "--system=s", "--chat=false"},
            "--system needs --chat (a system message is a chat message)"},
           {{"generate", "--timeout", "-1"},
            "--timeout must be a positive number of seconds, got '-1'"},
           {{"generate", "--timeout=0"}, "--timeout must be a positive number of seconds, got '0'"},
           {{"generate", "--timeout", "nan"},
            "--timeout must be a positive number of seconds, got 'nan'"},
           {{"generate", "--timeout", "inf"},
            "--timeout must be a positive number of seconds, got 'inf'"},
           {{"info", "--target", "localhost:99999"},
            "--target port must be within [1, 65535], got 'localhost:99999'"},
           {{"info", "--target=[::1]:0"}, "--target port must be within [1, 65535], got '[::1]:0'"},
           {{"health", "--target="}, "--target must be HOST:PORT, got ''"},
       }) {
    std::string error;
    EXPECT_FALSE(Parse(c.argv, &error).has_value()) << c.error;
    EXPECT_EQ(error, c.error);
  }
  std::string error;  // the same flags where they do mean something
  EXPECT_TRUE(Parse({"generate", "--chat", "--system", "s", "--timeout", "2.5"}, &error)
                  .has_value())
      << error;
  for (const char* target : {"localhost:65535", "[::1]:50051", "dns:///rtgen:50051",
                             "unix:/tmp/rtgen.sock", "rtgen-headless"}) {
    EXPECT_TRUE(Parse({"info", "--target", target}, &error).has_value()) << target << error;
  }
}

// generate has a deadline whether or not --timeout is given (without one, a stream over a
// half-open connection never returned).
TEST(CliArgsTest, GenerateHasADeadlineByDefault) {
  std::string error;
  const auto plain = Parse({"generate", "--prompt", "hi"}, &error);
  ASSERT_TRUE(plain.has_value()) << error;
  EXPECT_EQ(GenerateTimeoutSeconds(*plain), kDefaultGenerateTimeoutS);
  EXPECT_EQ(kDefaultGenerateTimeoutS, 600);
  const auto given = Parse({"generate", "--prompt", "hi", "--timeout", "2.5"}, &error);
  ASSERT_TRUE(given.has_value()) << error;
  EXPECT_EQ(GenerateTimeoutSeconds(*given), 2.5);
}

TEST(CliArgsTest, EverySubcommandTakesTheCommonFlags) {
  for (const char* command : {"generate", "health", "tokenize", "info", "load"}) {
    std::string error;
    EXPECT_TRUE(Parse({command, "--target", "h:1", "--tls", "--tls-ca", "ca.pem", "--auth-token",
                       "t"},
                      &error)
                    .has_value())
        << command << ": " << error;
  }
}

}  // namespace
}  // namespace rtgen
