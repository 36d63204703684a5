#include "hub/console/console_feed.h"

#include <utility>

namespace hub::console {

int64_t ConsoleFeed::Post(std::string kind, std::vector<std::string> projects,
                          std::string json) {
  absl::MutexLock lock(&mu_);
  ConsoleChange change;
  change.seq = ++head_;
  change.kind = std::move(kind);
  change.projects = std::move(projects);
  change.json = std::move(json);
  ring_.push_back(std::move(change));
  while (ring_.size() > capacity_) ring_.pop_front();
  changed_.SignalAll();
  return head_;
}

int64_t ConsoleFeed::head() const {
  absl::MutexLock lock(&mu_);
  return head_;
}

ConsoleBatch ConsoleFeed::WaitAfter(int64_t after, absl::Duration timeout,
                                    size_t limit) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (!closed_ && head_ <= after) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
  }
  ConsoleBatch batch;
  batch.head = head_;
  batch.closed = closed_;
  if (head_ <= after) return batch;
  // The ring holds head_ - size + 1 .. head_.
  const int64_t oldest = head_ - static_cast<int64_t>(ring_.size()) + 1;
  if (after + 1 < oldest) {
    batch.lost = true;
    return batch;
  }
  for (size_t i = static_cast<size_t>(after + 1 - oldest);
       i < ring_.size() && batch.changes.size() < limit; ++i) {
    batch.changes.push_back(ring_[i]);
  }
  return batch;
}

void ConsoleFeed::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  changed_.SignalAll();
}

}  // namespace hub::console
