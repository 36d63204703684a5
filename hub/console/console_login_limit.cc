#include "hub/console/console_login_limit.h"

#include <algorithm>

namespace hub::console {

LoginLimiter::LoginLimiter(const Clock* clock, LoginLimitOptions options)
    : clock_(clock), options_(options) {}

absl::Duration LoginLimiter::RetryAfter(const std::string& address) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return absl::ZeroDuration();
  if (it->second.window_end <= now) {
    entries_.erase(it);
    return absl::ZeroDuration();
  }
  if (it->second.failures < options_.max_failures) return absl::ZeroDuration();
  return it->second.window_end - now;
}

void LoginLimiter::Failed(const std::string& address) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(address);
  if (it != entries_.end() && it->second.window_end <= now) {
    entries_.erase(it);
    it = entries_.end();
  }
  if (it == entries_.end()) {
    if (entries_.size() >= options_.max_addresses) MakeRoom();
    it = entries_.emplace(address, Entry{0, now + options_.window}).first;
  }
  ++it->second.failures;
}

void LoginLimiter::Succeeded(const std::string& address) {
  absl::MutexLock lock(&mu_);
  entries_.erase(address);
}

size_t LoginLimiter::tracked() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void LoginLimiter::MakeRoom() {
  const absl::Time now = clock_->Now();
  // Ended windows go first; if none ended, the one that ends first.
  absl::erase_if(entries_,
                 [now](const auto& e) { return e.second.window_end <= now; });
  if (entries_.size() < options_.max_addresses) return;
  auto first = std::min_element(
      entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
        return a.second.window_end < b.second.window_end;
      });
  entries_.erase(first);
}

}  // namespace hub::console
