// rtgen-synth-model's shape flags (tools/synth_model_flags.h): a named shape as it is, its
// dimensions replaced (the LM head keeps the shape's tie unless --tie is given), and every bad
// value refused with an error naming its flag.

#include "tools/synth_model_flags.h"

#include <ostream>
#include <string>

#include "engine/model/synthetic_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen::tools {
namespace {

using ::testing::HasSubstr;

// The config the flags give; a refusal fails the test (and gives the shape's own).
ModelConfig Config(const SynthShapeFlags& f) {
  absl::StatusOr<ModelConfig> c = SynthShapeConfig(f);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

TEST(SynthShapeFlagsTest, NamedShapeAsItIs) {
  SynthShapeFlags f;
  f.shape = "llama3-8b";
  absl::StatusOr<ModelConfig> c = SynthShapeConfig(f);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(SyntheticShape("llama3-8b").ok());
  const ModelConfig want = *SyntheticShape("llama3-8b");
  EXPECT_EQ(c->num_layers, want.num_layers);
  EXPECT_EQ(c->head_dim, want.head_dim);
  EXPECT_EQ(c->tie_word_embeddings, want.tie_word_embeddings);
  EXPECT_EQ(c->name, want.name);
}

// A truncated 8B keeps its own (untied) LM head: the head is 0.5 B of its parameters.
TEST(SynthShapeFlagsTest, ReplacedDimensionsKeepTheShapesTie) {
  SynthShapeFlags f;
  f.shape = "llama3-8b";
  f.layers = "2";
  absl::StatusOr<ModelConfig> c = SynthShapeConfig(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->name, "synthetic-custom");
  f.tie = "true";
  EXPECT_TRUE(Config(f).tie_word_embeddings);
  // --tie alone applies too (it was read only with a dimension given).
  SynthShapeFlags untie;
  untie.shape = "smollm2-135m";
  untie.tie = "false";
  ASSERT_TRUE(SyntheticShape("smollm2-135m").ok());
  ASSERT_TRUE(SyntheticShape("smollm2-135m")->tie_word_embeddings);
  EXPECT_FALSE(Config(untie).tie_word_embeddings);
}

TEST(SynthShapeFlagsTest, HeadDimIsHiddenOverHeadsUnlessGiven) {
  SynthShapeFlags f;
  f.shape = "tiny";
  f.hidden = "128";
  f.heads = "4";
  f.kv_heads = "2";
  EXPECT_EQ(Config(f).head_dim, 32);
  f.head_dim = "16";
  EXPECT_EQ(Config(f).head_dim, 16);
  // --head-dim alone replaces a dimension too.
  SynthShapeFlags only;
  only.head_dim = "8";
  EXPECT_EQ(Config(only).name, "synthetic-custom");
}

struct BadShape {
  SynthShapeFlags flags;
  std::string error;  // a part of the message
};

void PrintTo(const BadShape& bad, std::ostream* os) { *os << bad.error; }

SynthShapeFlags With(std::string SynthShapeFlags::*field, const std::string& value,
                     const std::string& shape = "tiny") {
  SynthShapeFlags f;
  f.shape = shape;
  f.*field = value;
  return f;
}

class SynthShapeBadFlagTest : public ::testing::TestWithParam<BadShape> {};

TEST_P(SynthShapeBadFlagTest, IsRefusedByName) {
  absl::StatusOr<ModelConfig> c = SynthShapeConfig(GetParam().flags);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Flags, SynthShapeBadFlagTest,
    ::testing::Values(
        // Zero and negative values were skipped: the full shape was written instead.
        BadShape{With(&SynthShapeFlags::layers, "0", "llama3-8b"), "--layers must be"},
        BadShape{With(&SynthShapeFlags::layers, "-3"), "--layers must be an integer in 1..1024"},
        BadShape{With(&SynthShapeFlags::hidden, "12x"), "--hidden must be"},
        BadShape{With(&SynthShapeFlags::vocab, "2000000000"), "--vocab must be"},
        BadShape{With(&SynthShapeFlags::head_dim, "0"), "--head-dim must be"},
        BadShape{With(&SynthShapeFlags::kv_heads, "5000"), "--kv-heads must be"},
        BadShape{With(&SynthShapeFlags::ffn, "2097152"), "--ffn must be"},
        BadShape{With(&SynthShapeFlags::tie, "yes"), "--tie must be true or false"},
        // SmolLM2's 9 heads: 512 / 9 would floor head_dim to 56 (504 query columns).
        BadShape{With(&SynthShapeFlags::hidden, "512", "smollm2-135m"),
                 "--hidden 512 is not a multiple of --heads 9 (give --head-dim)"},
        BadShape{With(&SynthShapeFlags::kv_heads, "2", "smollm2-135m"),
                 "--heads 9 is not a multiple of --kv-heads 2"},
        BadShape{With(&SynthShapeFlags::shape, "gpt2"), "gpt2"},
        // The config's own check: an odd head_dim cannot rotate in pairs.
        BadShape{With(&SynthShapeFlags::head_dim, "7"), "the flags give an invalid shape"}));

}  // namespace
}  // namespace rtgen::tools
