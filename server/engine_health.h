#pragma once
// When the server stops reporting SERVING because of its engine (Server's health watch): a
// backend whose steps keep failing (a sticky device error fails every request) or a loop stuck
// in a step answer health checks as NOT_SERVING, so that a liveness probe restarts the pod and
// a readiness probe takes it out of the balancer; a step that succeeds, or the loop moving
// again, brings SERVING back.

#include <cstdint>

#include "absl/time/time.h"
#include "engine/engine.h"

namespace rtgen {

struct EngineHealthPolicy {
  int32_t max_failed_steps = 3;               // this many failed steps in a row: NOT_SERVING
  absl::Duration max_stall = absl::Seconds(120);  // no loop pass for this long with work
};

inline bool EngineServing(const EngineHealth& health, const EngineHealthPolicy& policy) {
  return health.failed_steps_in_a_row < policy.max_failed_steps &&
         health.stalled < policy.max_stall;
}

}  // namespace rtgen
