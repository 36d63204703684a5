// Group commit: one thread owns the write connection and commits queued
// operations in groups, one transaction (hence one WAL sync) per group.
//
// Each operation runs in its own SAVEPOINT, so an operation that fails (a
// constraint, or any error it returns) is rolled back alone and the others in
// its group still commit. Run() returns only after the group's COMMIT
// returned: an OK reply means committed with the connection's durability.
// It is not responsible for reads (readers use their own connections).
#ifndef HUB_STORAGE_GROUP_COMMIT_H_
#define HUB_STORAGE_GROUP_COMMIT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "storage/sqlite_db.h"

namespace hub::storage {

class GroupCommitWriter {
 public:
  // An operation: runs on the writer thread inside a transaction and a
  // savepoint. A non-OK return rolls back what it wrote.
  using Op = std::function<absl::Status(Connection&)>;

  struct Stats {
    int64_t groups = 0;
    int64_t ops = 0;
  };

  // `max_group_size` 1 gives one transaction per write (the baseline).
  // Starts the writer thread; takes ownership of `conn`.
  GroupCommitWriter(std::unique_ptr<Connection> conn, int max_group_size);
  // Finishes every queued operation, then stops the thread.
  ~GroupCommitWriter();

  GroupCommitWriter(const GroupCommitWriter&) = delete;
  GroupCommitWriter& operator=(const GroupCommitWriter&) = delete;

  // Enqueues `op` and blocks until its group has committed or failed.
  // Returns the op's own status, or the group's storage error (STORE_BUSY
  // from BEGIN, STORE_FULL from COMMIT, ...) in which case nothing of the op
  // was committed. Thread-safe.
  absl::Status Run(Op op);

  Stats stats() const;
  // Operations enqueued and not yet taken by the writer (for tests).
  int queued() const;

 private:
  struct Pending {
    Op op;
    absl::Status result;
    absl::Notification done;  // each caller sleeps on its own
  };

  void Loop();
  void CommitGroup(std::deque<Pending*>& group);

  std::unique_ptr<Connection> conn_;  // used by the writer thread only
  const int max_group_size_;
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when queue_ becomes non-empty
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_GROUP_COMMIT_H_
