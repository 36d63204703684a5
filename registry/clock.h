// Time as the domain sees it. Everything that reads the time takes a Clock, so
// tests can drive hours of protocol in milliseconds with a FakeClock and
// replay a failure exactly.
#ifndef HUB_REGISTRY_CLOCK_H_
#define HUB_REGISTRY_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hub {

// A source of wall-clock time. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The system's wall clock (absl::Now). It may step backwards.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  // A process-wide instance.
  static RealClock* Default();
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixMillis(1'700'000'000'000))
      : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  // Sets the time; may move backwards (to test clock steps).
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// Milliseconds since the Unix epoch, the unit triflux stores (*_ms columns).
inline int64_t UnixMillis(absl::Time t) { return absl::ToUnixMillis(t); }

}  // namespace hub

#endif  // HUB_REGISTRY_CLOCK_H_
