// RoleRegistry: watchers and the publication of committed role changes.
//
// Writers publish after their commit (RolePublication::kOwnWrites), or the
// change log's follower publishes every hub's changes in commit order
// (kChangeLog). Publications enter one queue that a single thread at a time
// drains (the first publisher to find it idle), so callbacks run in queue
// order with no registry lock held. Two writers of the same role can finish
// in either order; the queue keeps per role only versions newer than the
// last one queued, so every watcher sees each role's versions ascending (a
// superseded version is skipped, never reordered). The follower publishes
// every version of a role in order, so from it nothing is skipped.
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "registry/role_registry.h"
#include "registry/role_registry_internal.h"
#include "status/status.h"

namespace hub {

class RoleRegistry::Watcher {
 public:
  Watcher(RoleWatchFilter filter, RoleWatchCallback callback)
      : filter_(std::move(filter)), callback_(std::move(callback)) {}

  bool Matches(const RoleRecord& role) const {
    if (filter_.wire && role.role_key_wire != *filter_.wire) return false;
    if (filter_.project_id && role.project_id != *filter_.project_id) {
      return false;
    }
    if (!filter_.scope.Allows(role.project_id)) return false;
    return !filter_.kind || role.role_kind == RoleKindName(*filter_.kind);
  }

  // Holds only this watcher's lock, so that Deactivate waits for a running
  // callback and none starts afterwards.
  void Deliver(const RoleEvent& event) {
    absl::MutexLock lock(&mu_);
    if (active_) callback_(event);
  }

  void Deactivate() {
    absl::MutexLock lock(&mu_);
    active_ = false;
  }

 private:
  const RoleWatchFilter filter_;
  const RoleWatchCallback callback_;
  absl::Mutex mu_;
  bool active_ ABSL_GUARDED_BY(mu_) = true;
};

class RoleRegistry::WatchHandle final : public RoleWatch {
 public:
  WatchHandle(RoleRegistry* registry, uint64_t id,
              std::shared_ptr<Watcher> watcher)
      : registry_(registry), id_(id), watcher_(std::move(watcher)) {}
  ~WatchHandle() override { Cancel(); }

  void Cancel() override {
    if (watcher_ == nullptr) return;
    registry_->Unregister(id_);
    watcher_->Deactivate();
    watcher_.reset();
  }

 private:
  RoleRegistry* const registry_;
  const uint64_t id_;
  std::shared_ptr<Watcher> watcher_;
};

void RoleRegistry::Unregister(uint64_t id) {
  absl::MutexLock lock(&watch_mu_);
  watchers_.erase(id);
}

int RoleRegistry::WatchCount() {
  absl::MutexLock lock(&watch_mu_);
  return static_cast<int>(watchers_.size());
}

absl::StatusOr<RoleWatchStart> RoleRegistry::Watch(
    const RoleWatchFilter& filter, RoleWatchCallback callback) {
  if (filter.project_id && !IsProjectId(*filter.project_id)) {
    return role_internal::FieldError(
        InvalidArgumentError("PROJECT_ID_INVALID",
                             "project_id must match ^prj_[A-Za-z0-9_-]{22}$"),
        "project_id");
  }
  if (filter.wire) {
    absl::StatusOr<RoleKey> key = DecodeRoleKey(*filter.wire);
    if (!key.ok())
      return role_internal::FieldError(key.status(), "role_key_wire");
  }
  auto watcher = std::make_shared<Watcher>(filter, std::move(callback));
  uint64_t id = 0;
  {
    absl::MutexLock lock(&watch_mu_);
    id = next_watch_id_++;
    watchers_[id] = watcher;
  }
  RoleWatchStart start;
  start.watch = std::make_unique<WatchHandle>(this, id, watcher);
  // Read after registering: a change committed from now on is delivered,
  // one committed earlier is in the snapshot (or both).
  start.read_at_ms = UnixMillis(clock_->Now());
  storage::RoleFilter f;
  f.project_id = filter.project_id;
  if (filter.kind) f.role_kind = std::string(RoleKindName(*filter.kind));
  absl::StatusOr<std::vector<RoleRecord>> rows = store_->ListRoles(f);
  if (!rows.ok()) return rows.status();  // start.watch cancels itself
  for (RoleRecord& row : *rows) {
    if (watcher->Matches(row)) start.snapshot.push_back(std::move(row));
  }
  return start;
}

void RoleRegistry::Publish(const RoleRecord& role) {
  if (options_.publication == RolePublication::kOwnWrites) {
    RoleEvent event;
    event.kind =
        role.version == 0 ? RoleChangeKind::kCreated : RoleChangeKind::kUpdated;
    event.role = role;
    event.changed_at_ms = UnixMillis(clock_->Now());
    Dispatch(std::move(event));
  }
  if (options_.on_role_committed) options_.on_role_committed();
}

void RoleRegistry::PublishRemoved(const RoleRecord& role) {
  if (options_.publication == RolePublication::kOwnWrites) {
    RoleEvent event;
    event.kind = RoleChangeKind::kRemoved;
    event.role = role;
    event.changed_at_ms = UnixMillis(clock_->Now());
    Dispatch(std::move(event));
  }
  if (options_.on_role_committed) options_.on_role_committed();
}

void RoleRegistry::PublishLogged(const storage::RoleChange& change) {
  if (options_.publication != RolePublication::kChangeLog) return;
  RoleEvent event;
  switch (change.kind) {
    case storage::RoleChange::Kind::kCreated:
      event.kind = RoleChangeKind::kCreated;
      break;
    case storage::RoleChange::Kind::kUpdated:
      event.kind = RoleChangeKind::kUpdated;
      break;
    case storage::RoleChange::Kind::kRemoved:
      event.kind = RoleChangeKind::kRemoved;
      break;
  }
  event.role = change.role;
  event.changed_at_ms = change.committed_at_ms;
  Dispatch(std::move(event));
}

void RoleRegistry::Dispatch(RoleEvent event) {
  {
    absl::MutexLock lock(&dispatch_mu_);
    // A removal ends the wire's history: it goes out whatever versions were
    // queued, and nothing older (a write that raced the removal) follows.
    constexpr int64_t kGone = std::numeric_limits<int64_t>::max();
    const bool removed = event.kind == RoleChangeKind::kRemoved;
    auto [it, inserted] = queued_version_.try_emplace(
        event.role.role_key_wire, removed ? kGone : event.role.version);
    if (!inserted) {
      if (it->second == kGone) return;  // already removed
      if (removed) {
        it->second = kGone;
      } else {
        if (it->second >= event.role.version) return;  // superseded
        it->second = event.role.version;
      }
    }
    queue_.push_back(std::move(event));
    if (dispatching_) return;  // the running dispatcher will deliver it
    dispatching_ = true;
  }
  for (;;) {
    std::vector<RoleEvent> batch;
    {
      absl::MutexLock lock(&dispatch_mu_);
      if (queue_.empty()) {
        dispatching_ = false;
        return;
      }
      batch.swap(queue_);
    }
    std::vector<std::shared_ptr<Watcher>> watchers;
    {
      absl::MutexLock lock(&watch_mu_);
      watchers.reserve(watchers_.size());
      for (const auto& [id, w] : watchers_) watchers.push_back(w);
    }
    for (const RoleEvent& e : batch) {
      for (const std::shared_ptr<Watcher>& w : watchers) {
        if (w->Matches(e.role)) w->Deliver(e);
      }
    }
  }
}

}  // namespace hub
