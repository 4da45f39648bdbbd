#pragma once
// Polls a server's GetLoad until nothing waits or runs and every KV block is free (evictable
// prefix-cache blocks count as free), or `timeout` passes; returns the last snapshot. A GetLoad
// that never answers, or a pool of no blocks, is a test failure: the empty Load passed every
// idle check (0 == 0). The server and reliability tests share it.

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "gtest/gtest.h"

namespace rtgen::testing {

inline v1::Load WaitForIdle(InferenceClient& client, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + timeout;
  v1::Load load;
  bool answered = false;
  while (true) {
    absl::StatusOr<v1::Load> got = client.GetLoad();
    if (got.ok()) {
      load = *got;
      answered = true;
      if (load.waiting() == 0 && load.running() == 0 &&
          load.kv_blocks_free() == load.kv_blocks_total()) {
        break;
      }
    }
    if (absl::Now() >= end) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!answered) ADD_FAILURE() << "GetLoad never answered";
  EXPECT_GT(load.kv_blocks_total(), 0) << "GetLoad reports no KV blocks";
  return load;
}

}  // namespace rtgen::testing
