// rtgen-engine-bench's flags: defaults, every flag parsed, and each bad flag or value refused
// with an error that names it (the limits flags set together too); its model shapes.

#include "tools/engine_bench_options.h"

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen::tools {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<EngineBenchOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "rtgen-engine-bench");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseEngineBenchFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(EngineBenchOptionsTest, DefaultsAreTheIssuesRuns) {
  absl::StatusOr<EngineBenchOptions> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->models, (std::vector<std::string>{"smollm2-135m", "llama3.2-1b", "llama3-8b"}));
  EXPECT_EQ(o->batches, (std::vector<int32_t>{1, 8, 32, 64, 128, 256}));
  EXPECT_EQ(o->ttft_prompts, (std::vector<int32_t>{128, 2048}));
  EXPECT_EQ(o->prompt, 128);
  EXPECT_EQ(o->steps, 128);
  EXPECT_TRUE(o->eager);
  EXPECT_FALSE(o->penalties);
  EXPECT_EQ(o->max_penalty_tokens, kernels::kDefaultMaxPenaltyTokens);
  EXPECT_TRUE(o->mixed.empty());
  EXPECT_FALSE(o->profile_step);
  EXPECT_EQ(o->model_rounds, 1);
  EXPECT_EQ(o->spacer_mib, 0);
  EXPECT_EQ(o->kv_spacer_mib, 0);
}

TEST(EngineBenchOptionsTest, ParsesEveryFlag) {
  absl::StatusOr<EngineBenchOptions> o = Parse(
      {"--models", "llama3-8b,smollm2-135m", "--batches", "1,64", "--ttft-prompts", "16",
       "--mixed", "4:16,64:128", "--prompt", "100", "--steps", "20", "--repeats", "3",
       "--built-repeats", "0", "--ttft-repeats", "2", "--max-model-len", "2048", "--seed", "7",
       "--device", "1", "--json", "out.json", "--max-penalty-tokens", "0", "--logprobs", "20",
       "--no-eager", "--penalties", "--kernel-trace"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->models, (std::vector<std::string>{"llama3-8b", "smollm2-135m"}));
  EXPECT_EQ(o->batches, (std::vector<int32_t>{1, 64}));
  EXPECT_EQ(o->ttft_prompts, (std::vector<int32_t>{16}));
  using Mixed = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(o->mixed, (Mixed{{4, 16}, {64, 128}}));
  EXPECT_EQ(o->prompt, 100);
  EXPECT_EQ(o->steps, 20);
  EXPECT_EQ(o->repeats, 3);
  EXPECT_EQ(o->built_repeats, 0);
  EXPECT_EQ(o->ttft_repeats, 2);
  EXPECT_EQ(o->max_model_len, 2048);
  EXPECT_EQ(o->seed, 7u);
  EXPECT_EQ(o->device, 1);
  EXPECT_EQ(o->json_path, "out.json");
  EXPECT_EQ(o->max_penalty_tokens, 0);
  EXPECT_EQ(o->logprobs, 20);
  EXPECT_FALSE(o->eager);
  EXPECT_TRUE(o->penalties);
  EXPECT_TRUE(o->kernel_trace);
}

TEST(EngineBenchOptionsTest, ParsesProfileStepAndModelRounds) {
  absl::StatusOr<EngineBenchOptions> o = Parse({"--profile-step", "--model-rounds", "4"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->profile_step);
  EXPECT_FALSE(o->kernel_trace);
  EXPECT_EQ(o->model_rounds, 4);
  EXPECT_THAT(std::string(kEngineBenchUsage), HasSubstr("[--model-rounds 1]"));
}

TEST(EngineBenchOptionsTest, ParsesSpacers) {
  absl::StatusOr<EngineBenchOptions> o = Parse({"--spacer-mib", "64", "--kv-spacer-mib", "2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->spacer_mib, 64);
  EXPECT_EQ(o->kv_spacer_mib, 2);
  EXPECT_THAT(std::string(kEngineBenchUsage), HasSubstr("[--kv-spacer-mib 0]"));
}

TEST(EngineBenchOptionsTest, HelpStopsParsing) {
  absl::StatusOr<EngineBenchOptions> o = Parse({"--help", "--bogus"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->help);
  EXPECT_THAT(std::string(kEngineBenchUsage), HasSubstr("--mixed DECODE:PROMPT"));
}

struct BadFlag {
  std::vector<std::string> args;
  std::string error;  // a part of the message
};

void PrintTo(const BadFlag& bad, std::ostream* os) {
  for (const std::string& a : bad.args) *os << a << " ";
}

class EngineBenchBadFlagTest : public ::testing::TestWithParam<BadFlag> {};

TEST_P(EngineBenchBadFlagTest, IsRefusedByName) {
  absl::StatusOr<EngineBenchOptions> o = Parse(GetParam().args);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Flags, EngineBenchBadFlagTest,
    ::testing::Values(
        BadFlag{{"--bogus", "1"}, "unknown flag --bogus"},
        BadFlag{{"--steps"}, "--steps needs a value"},
        BadFlag{{"--prompt", "0"}, "bad value for --prompt: '0'"},
        BadFlag{{"--prompt", "12x"}, "bad value for --prompt: '12x'"},
        BadFlag{{"--steps", "-3"}, "bad value for --steps"},
        BadFlag{{"--repeats", "99999999999"}, "bad value for --repeats"},
        BadFlag{{"--seed", ""}, "bad value for --seed"},
        BadFlag{{"--json", ""}, "bad value for --json"},
        BadFlag{{"--batches", "1,,8"}, "bad value for --batches"},
        BadFlag{{"--batches", "1,0"}, "bad value for --batches"},
        BadFlag{{"--batches", "5000"}, "--batches: 5000 is above 4096"},
        BadFlag{{"--models", ""}, "bad value for --models"},
        BadFlag{{"--logprobs", "21"}, "bad value for --logprobs: '21'"},
        BadFlag{{"--model-rounds", "0"}, "bad value for --model-rounds: '0'"},
        BadFlag{{"--model-rounds"}, "--model-rounds needs a value"},
        BadFlag{{"--spacer-mib", "-1"}, "bad value for --spacer-mib: '-1'"},
        BadFlag{{"--kv-spacer-mib", "x"}, "bad value for --kv-spacer-mib: 'x'"},
        BadFlag{{"--kernel-trace", "--profile-step"}, "--kernel-trace and --profile-step"},
        BadFlag{{"--mixed", "4"}, "bad value for --mixed"},
        BadFlag{{"--mixed", "4:16:2"}, "bad value for --mixed"},
        BadFlag{{"--mixed", "4:1"}, "--mixed: 4:1 must have prompt >= 2"},
        BadFlag{{"--mixed", "100:4000"}, "--mixed: 100:4000"},
        BadFlag{{"--prompt", "4097"}, "--prompt must be <= 4096"},
        BadFlag{{"--max-model-len", "200"}, "prompt + steps <= --max-model-len"},
        BadFlag{{"--ttft-prompts", "128,4096"}, "--ttft-prompts: 4096 must be"},
        // A trailing comma is an empty last item, as "1,,8" has one in the middle.
        BadFlag{{"--batches", "1,8,"}, "bad value for --batches: '1,8,'"},
        BadFlag{{"--models", "llama3-8b,"}, "bad value for --models"},
        BadFlag{{"--mixed", "4:16,"}, "bad value for --mixed"},
        // Rows are keyed by batch size, models by name, TTFT by prompt: one of each.
        BadFlag{{"--batches", "8,1,8"}, "--batches: 8 is given twice"},
        BadFlag{{"--models", "llama3-8b,llama3-8b"}, "--models: llama3-8b is given twice"},
        // Every name is checked before anything is timed (a typo last is still refused first).
        BadFlag{{"--models", "smollm2-135m,llama3-8B"}, "--models: unknown model 'llama3-8B'"},
        BadFlag{{"--models", "tiny"}, "--models: 'tiny' is a test shape"},
        BadFlag{{"--ttft-prompts", "128,128"}, "--ttft-prompts: 128 is given twice"},
        // The largest batch's cache slots past int32 (4096 x 1,048,577 blocks of 16).
        BadFlag{{"--batches", "4096", "--prompt", "16", "--steps", "16777216", "--max-model-len",
                 "16777232"},
                "KV cache slots"},
        BadFlag{{"--json", "/no/such/rtgen/dir/out.json"},
                "--json: no directory '/no/such/rtgen/dir'"},
        // A directory, existing or named with a trailing slash, is no file to write.
        BadFlag{{"--json", "/tmp"}, "--json: '/tmp' is a directory, not a file"},
        BadFlag{{"--json", "/tmp/"}, "--json: '/tmp/' is a directory, not a file"}));

TEST(EngineBenchShapeTest, NamesTheIssuesShapes) {
  absl::StatusOr<ModelConfig> smol = BenchShape("smollm2-135m");
  ASSERT_TRUE(smol.ok()) << smol.status();
  EXPECT_EQ(smol->name, "smollm2-135m");
  EXPECT_EQ(smol->hidden_size, 576);
  EXPECT_EQ(smol->head_dim, 64);
  EXPECT_TRUE(smol->tie_word_embeddings);
  absl::StatusOr<ModelConfig> llama = BenchShape("llama3-8b");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->intermediate_size, 14336);
  EXPECT_FALSE(llama->tie_word_embeddings);
  absl::StatusOr<ModelConfig> small = BenchShape("llama3.2-1b");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(small->rope_scaling.has_value());
}

TEST(EngineBenchShapeTest, RefusesOtherNames) {
  for (const char* name : {"llama3-70b", "tiny", ""}) {
    absl::StatusOr<ModelConfig> c = BenchShape(name);
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("--models")) << name;
  }
}

}  // namespace
}  // namespace rtgen::tools
