// The Llama shapes the CUDA backend runs (kernels/device_config.h): the issue's three shapes pass,
// and each shape no kernel takes is refused by the field that is wrong (a head_dim that is not a
// multiple of 8 used to pass here and fail at graph capture with a bare "invalid argument").

#include "kernels/device_config.h"

#include <string>

#include "engine/model/synthetic_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rtgen {
namespace {

using ::testing::HasSubstr;

TEST(DeviceConfigTest, TheIssuesShapesPass) {
  for (const char* name : {"smollm2-135m", "llama3.2-1b", "llama3-8b", "tiny"}) {
    absl::StatusOr<ModelConfig> c = SyntheticShape(name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(CheckDeviceConfig(*c).ok()) << name << ": " << CheckDeviceConfig(*c);
  }
}

TEST(DeviceConfigTest, EachBadFieldIsRefusedByName) {
  const ModelConfig good = *SyntheticShape("smollm2-135m");
  struct Case {
    void (*bend)(ModelConfig&);
    std::string field;
  };
  const Case cases[] = {
      {[](ModelConfig& c) { c.head_dim = 36; }, "head_dim 36"},   // even, not a multiple of 8
      {[](ModelConfig& c) { c.head_dim = 264; }, "head_dim 264"},  // past 256
      {[](ModelConfig& c) { c.head_dim = 0; }, "head_dim 0"},
      {[](ModelConfig& c) { c.num_kv_heads = 2; }, "num_kv_heads 2"},  // 9 heads
      {[](ModelConfig& c) { c.num_kv_heads = 0; }, "num_kv_heads 0"},
      {[](ModelConfig& c) { c.num_heads = 0; }, "num_heads 0"},
      {[](ModelConfig& c) { c.num_layers = 0; }, "num_layers 0"},
      {[](ModelConfig& c) { c.intermediate_size = -1; }, "intermediate_size -1"},
      {[](ModelConfig& c) { c.hidden_size = 0; }, "hidden_size 0"},
      {[](ModelConfig& c) { c.vocab_size = 0; }, "vocab_size 0"},
  };
  for (const Case& k : cases) {
    ModelConfig c = good;
    k.bend(c);
    const absl::Status st = CheckDeviceConfig(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << k.field << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(k.field)) << st;
  }
}

}  // namespace
}  // namespace rtgen
