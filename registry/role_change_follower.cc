#include "registry/role_change_follower.h"

#include <pthread.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

namespace {

// Prune batches per prune_interval at most (each its own write).
constexpr int kPruneBatches = 100;
constexpr int64_t kPruneBatchRows = 10'000;

}  // namespace

RoleChangeFollower::RoleChangeFollower(storage::RoleStore* store,
                                       RoleChangeFollowerOptions options)
    : store_(store), options_(std::move(options)) {}

RoleChangeFollower::~RoleChangeFollower() { Stop(); }

absl::Status RoleChangeFollower::Start(Publisher publish) {
  absl::StatusOr<int64_t> head = store_->RoleChangeHead();
  if (!head.ok()) return head.status();
  publish_ = std::move(publish);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::OkStatus();
    cursor_ = *head;
    started_ = true;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hub-role-follow");  // top -H, perf
    Run();
  });
  return absl::OkStatus();
}

void RoleChangeFollower::Kick() {
  absl::MutexLock lock(&mu_);
  if (!started_ || stopping_) return;
  kicked_ = true;
  wake_.Signal();
}

void RoleChangeFollower::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t RoleChangeFollower::cursor() const {
  absl::MutexLock lock(&mu_);
  return cursor_;
}

void RoleChangeFollower::Run() {
  absl::Time next_prune = absl::Now() + options_.prune_interval;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + options_.poll_interval;
      while (!stopping_ && !kicked_ && !wake_.WaitWithDeadline(&mu_, until)) {
      }
      const absl::Time next_read = last_read_ + options_.min_read_interval;
      while (!stopping_ && absl::Now() < next_read) {
        wake_.WaitWithDeadline(&mu_, next_read);
      }
      if (stopping_) return;
      kicked_ = false;
    }
    last_read_ = absl::Now();
    CatchUp();
    if (options_.prune_interval > absl::ZeroDuration() &&
        absl::Now() >= next_prune) {
      Prune();
      next_prune = absl::Now() + options_.prune_interval;
    }
  }
}

void RoleChangeFollower::CatchUp() {
  for (;;) {
    const int64_t after = cursor();
    absl::StatusOr<storage::RoleChangePage> page =
        store_->ReadRoleChanges(after, options_.page_size);
    if (!page.ok()) {
      Failed(page.status());
      return;
    }
    failing_ = false;
    const std::vector<storage::RoleChange>& changes = page->changes;
    const int64_t next = changes.empty() ? page->head + 1 : changes[0].seq;
    // Pruned before they were read; or the head went back (a database
    // restored, or a standby promoted without the last commits), and the
    // seqs after it will be handed out again.
    if (next > after + 1 || page->head < after) {
      if (options_.on_error) {
        options_.on_error(ReasonError(
            absl::StatusCode::kDataLoss, "ROLE_CHANGES_MISSED",
            page->head < after
                ? absl::StrCat("the role change log's head went back from ",
                               after, " to ", page->head,
                               "; the roles are read again")
                : absl::StrCat("role changes ", after + 1, " to ", next - 1,
                               " were pruned before this hub read them; "
                               "the roles are read again")));
      }
      if (absl::Status s = Reread(); !s.ok()) {
        Failed(s);
        return;
      }
      continue;
    }
    for (const storage::RoleChange& change : changes) {
      publish_(change);
      absl::MutexLock lock(&mu_);
      cursor_ = change.seq;
    }
    if (static_cast<int64_t>(changes.size()) < options_.page_size) return;
  }
}

absl::Status RoleChangeFollower::Reread() {
  // The head first: every change up to it is in the rows read next, and
  // the changes after it are read from the log (a version the rows already
  // hold is dropped by the registry's dispatch).
  absl::StatusOr<int64_t> head = store_->RoleChangeHead();
  if (!head.ok()) return head.status();
  absl::StatusOr<std::vector<RoleRecord>> rows =
      store_->ListRoles(storage::RoleFilter{});
  if (!rows.ok()) return rows.status();
  const int64_t now_ms = storage::SystemNowMs();
  for (RoleRecord& row : *rows) {
    storage::RoleChange change;
    change.kind = storage::RoleChange::Kind::kUpdated;
    change.role = std::move(row);
    change.committed_at_ms = now_ms;
    publish_(change);
  }
  absl::MutexLock lock(&mu_);
  cursor_ = *head;
  return absl::OkStatus();
}

void RoleChangeFollower::Prune() {
  const int64_t keep_ms = absl::ToInt64Milliseconds(options_.retention);
  for (int i = 0; i < kPruneBatches; ++i) {
    absl::StatusOr<int64_t> pruned =
        store_->PruneRoleChanges(keep_ms, kPruneBatchRows);
    if (!pruned.ok()) {
      if (options_.on_error) options_.on_error(pruned.status());
      return;
    }
    if (*pruned < kPruneBatchRows) return;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
  }
}

void RoleChangeFollower::Failed(const absl::Status& status) {
  if (failing_) return;
  failing_ = true;
  if (options_.on_error) options_.on_error(status);
}

}  // namespace hub
