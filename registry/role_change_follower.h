// RoleChangeFollower: reads the store's role change log by cursor and hands
// every change, in seq (commit) order, to a publisher
// (RoleRegistry::PublishLogged), so that watchers on every hub sharing the
// database see the changes made through every hub, each once, in version
// order (docs/design/multi-hub.md, "Role changes across hubs").
//
// Woken by Kick (this hub's commit, another hub's hint, a listener's resync
// after a reconnect) and by a slow poll, the safety net for a hint lost in
// flight. Starts at the log's head: changes committed before Start are not
// published (watchers read their snapshot after registering). Not
// responsible for the hints themselves (hub/cluster/role_change_feed.h), nor
// for what watchers do with a change.
//
// One thread. A read that fails is retried on the next wake from the same
// cursor. Changes pruned before they were read (a follower that could not
// read for longer than the log's retention), or a head that went back (a
// database restored or a standby promoted without its last commits), are
// reported and the roles read again: every row is published as an update,
// so watchers end on the newest state, with a version gap, and roles
// deleted meanwhile are not published as removed. The follower also prunes
// the log. Thread-safe.
#ifndef HUB_REGISTRY_ROLE_CHANGE_FOLLOWER_H_
#define HUB_REGISTRY_ROLE_CHANGE_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/store.h"

namespace hub {

struct RoleChangeFollowerOptions {
  // The safety net: the log is read at least this often.
  absl::Duration poll_interval = absl::Milliseconds(200);
  // Reads start at least this long apart: kicks that arrive sooner wait and
  // are served by one read, so a busy writer costs at most one read per
  // interval (an idle follower reads at once).
  absl::Duration min_read_interval = absl::Milliseconds(2);
  // Changes read per query.
  int64_t page_size = 500;
  // Changes older than this are pruned, every prune_interval (zero: never).
  absl::Duration retention = absl::Minutes(5);
  absl::Duration prune_interval = absl::Seconds(30);
  // Told, on the follower's thread, when reading starts failing (once per
  // run of failures), when changes were missed (pruned before they were
  // read; reason ROLE_CHANGES_MISSED) and when pruning fails. Default:
  // nothing.
  std::function<void(const absl::Status&)> on_error;
};

class RoleChangeFollower {
 public:
  using Publisher = std::function<void(const storage::RoleChange&)>;

  // `store` must outlive the follower and have a role change log.
  RoleChangeFollower(storage::RoleStore* store,
                     RoleChangeFollowerOptions options = {});
  // Stop().
  ~RoleChangeFollower();
  RoleChangeFollower(const RoleChangeFollower&) = delete;
  RoleChangeFollower& operator=(const RoleChangeFollower&) = delete;

  // Reads the log's head (the cursor starts there) and starts the thread,
  // which calls `publish` for each later change, in seq order, one at a
  // time. Errors: the store's (the head unreadable). Call once.
  absl::Status Start(Publisher publish);
  // Asks for a read now. Cheap and never blocks on the store; any thread.
  // Before Start or after Stop: does nothing.
  void Kick();
  // Joins the thread; `publish` is not running and never runs again once
  // this returns. Idempotent.
  void Stop();

  // The seq of the last change published (or skipped over by a re-read of
  // the roles).
  int64_t cursor() const;

 private:
  void Run();
  // Publishes every change after the cursor.
  void CatchUp();
  // After missed changes: publishes every role as it is now and moves the
  // cursor to the head read before them.
  absl::Status Reread();
  void Prune();
  // on_error for the first failure of a run of failures.
  void Failed(const absl::Status& status);

  storage::RoleStore* const store_;
  const RoleChangeFollowerOptions options_;
  Publisher publish_;  // set by Start, used by the thread only
  // The thread's: a run of failures reported; when the last read began.
  bool failing_ = false;
  absl::Time last_read_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  int64_t cursor_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_CHANGE_FOLLOWER_H_
