#include "server/log_throttle.h"

#include <gtest/gtest.h>

namespace rtgen {
namespace {

TEST(LogThrottleTest, OneLineAnInterval) {
  LogThrottle throttle(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(throttle.Due(t0));  // the first
  EXPECT_FALSE(throttle.Due(t0));
  EXPECT_FALSE(throttle.Due(t0 + absl::Milliseconds(999)));
  EXPECT_TRUE(throttle.Due(t0 + absl::Seconds(1)));
  EXPECT_FALSE(throttle.Due(t0 + absl::Milliseconds(1500)));
  EXPECT_TRUE(throttle.Due(t0 + absl::Seconds(5)));
}

}  // namespace
}  // namespace rtgen
