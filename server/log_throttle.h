#pragma once
// At most one log line an interval from many threads (an overload's rejections come in bursts:
// one line a second says it without flooding the log).

#include <atomic>
#include <cstdint>
#include <limits>

#include "absl/time/time.h"

namespace rtgen {

class LogThrottle {
 public:
  explicit LogThrottle(absl::Duration interval)
      : interval_ns_(absl::ToInt64Nanoseconds(interval)) {}

  // True for the first call, then for the first call at least `interval` after the last true
  // one.
  bool Due(absl::Time now) {
    const int64_t now_ns = absl::ToUnixNanos(now);
    int64_t last = last_ns_.load(std::memory_order_relaxed);
    while (last == kNever || now_ns - last >= interval_ns_) {
      if (last_ns_.compare_exchange_weak(last, now_ns, std::memory_order_relaxed)) return true;
    }
    return false;
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
  const int64_t interval_ns_;
  std::atomic<int64_t> last_ns_{kNever};
};

}  // namespace rtgen
