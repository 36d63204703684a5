// Backoff: the delays between reconnect attempts. Exponential growth from
// `initial` by `multiplier` up to `max`, with proportional jitter so that a
// fleet of clients cut off by the same hub restart does not come back in
// lockstep. Pure computation: the randomness is injected, so tests are
// deterministic. Not thread-safe (one owner, e.g. a session's thread).
#ifndef HUB_CLIENTS_CPP_BACKOFF_H_
#define HUB_CLIENTS_CPP_BACKOFF_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hub::client {

struct BackoffPolicy {
  // The first delay (before jitter). Positive.
  absl::Duration initial = absl::Milliseconds(100);
  // The largest delay (before jitter); >= initial.
  absl::Duration max = absl::Seconds(5);
  // Growth factor per failed attempt; >= 1.
  double multiplier = 2.0;
  // Each delay is drawn uniformly from [d * (1 - jitter), d * (1 + jitter)]
  // (d the un-jittered delay), then capped at max * (1 + jitter). 0..1.
  double jitter = 0.2;
};

// INVALID_ARGUMENT when a field is out of its documented range.
absl::Status ValidateBackoffPolicy(const BackoffPolicy& policy);

class Backoff {
 public:
  // `uniform01` returns values in [0, 1); the default draws from a
  // per-object absl::BitGen.
  explicit Backoff(BackoffPolicy policy,
                   std::function<double()> uniform01 = nullptr);

  // The delay before the next attempt; each call grows the base delay.
  absl::Duration Next();
  // After a success: the next delay starts from `initial` again.
  void Reset();
  // Number of Next() calls since construction or the last Reset().
  int attempts() const { return attempts_; }

 private:
  BackoffPolicy policy_;
  std::function<double()> uniform01_;
  absl::Duration current_;
  int attempts_ = 0;
};

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_BACKOFF_H_
