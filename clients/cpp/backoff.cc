#include "clients/cpp/backoff.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/random/random.h"

namespace hub::client {

absl::Status ValidateBackoffPolicy(const BackoffPolicy& policy) {
  if (policy.initial <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("backoff initial must be positive");
  }
  if (policy.max < policy.initial) {
    return absl::InvalidArgumentError("backoff max must be >= initial");
  }
  if (!(policy.multiplier >= 1.0)) {
    return absl::InvalidArgumentError("backoff multiplier must be >= 1");
  }
  if (!(policy.jitter >= 0.0 && policy.jitter <= 1.0)) {
    return absl::InvalidArgumentError("backoff jitter must be in 0..1");
  }
  return absl::OkStatus();
}

Backoff::Backoff(BackoffPolicy policy, std::function<double()> uniform01)
    : policy_(policy), uniform01_(std::move(uniform01)) {
  if (!uniform01_) {
    auto gen = std::make_shared<absl::BitGen>();
    uniform01_ = [gen] { return absl::Uniform<double>(*gen, 0.0, 1.0); };
  }
  Reset();
}

absl::Duration Backoff::Next() {
  const absl::Duration base = current_;
  current_ = std::min(policy_.max, current_ * policy_.multiplier);
  ++attempts_;
  // Map [0, 1) onto [1 - jitter, 1 + jitter).
  const double factor = 1.0 + policy_.jitter * (2.0 * uniform01_() - 1.0);
  return std::min(base * factor, policy_.max * (1.0 + policy_.jitter));
}

void Backoff::Reset() {
  current_ = policy_.initial;
  attempts_ = 0;
}

}  // namespace hub::client
