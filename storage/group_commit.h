// Group commit: one thread owns the write connection and commits queued
// operations in groups, one transaction (hence one WAL sync) per group.
//
// An operation that fails (a constraint, or any error it returns) is rolled
// back alone and the others in its group still commit. A group runs first
// without savepoints; only when an operation fails after changing a row is
// the group's transaction undone and the group run again, each operation in
// its own SAVEPOINT. Operations must therefore be safe to run twice: they
// write only through the connection (and caches the rollback hook drops). Run()
// returns only after the group's COMMIT returned: an OK reply means committed
// with the connection's durability. Submit() is the same without a waiting
// thread: its callback runs once the group committed, so an RPC handler can
// answer from there (no thread parked per write, no wake-up per write: one per
// group). It is not responsible for reads (readers use their own connections).
#ifndef HUB_STORAGE_GROUP_COMMIT_H_
#define HUB_STORAGE_GROUP_COMMIT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "storage/sqlite_db.h"

namespace hub::storage {

class GroupCommitWriter {
 public:
  // An operation: runs on the writer thread inside a transaction. A non-OK
  // return rolls back what it wrote. May run twice (see above).
  using Op = std::function<absl::Status(Connection&)>;
  // Receives what Run() would have returned.
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  struct Stats {
    int64_t groups = 0;
    int64_t ops = 0;
    // Groups run a second time, with savepoints, because an operation
    // failed after writing.
    int64_t replays = 0;
  };
  // Told about each group after its COMMIT (or failure) on the writer
  // thread: how many operations it held and how long BEGIN..COMMIT took.
  // For metrics; must be quick and must not write.
  using CommitObserver = std::function<void(int ops, absl::Duration latency)>;
  // Runs on the writer thread each time a group's transaction is undone:
  // when it did not commit (BEGIN, a lost transaction or COMMIT failed),
  // before any of its callers hears back, and before a group is replayed with
  // savepoints. Whatever the store caches about rows the group wrote must be
  // dropped. Must not write.
  using RollbackHook = std::function<void()>;

  // `max_group_size` 1 gives one transaction per write (the baseline).
  // Starts the writer thread and `completion_threads` threads for Submit()
  // callbacks and Run() wake-ups; takes ownership of `conn`.
  GroupCommitWriter(std::unique_ptr<Connection> conn, int max_group_size,
                    int completion_threads = 2,
                    CommitObserver observer = nullptr,
                    RollbackHook on_rollback = nullptr);
  // Finishes every queued operation and runs every callback, then stops the
  // threads.
  ~GroupCommitWriter();

  GroupCommitWriter(const GroupCommitWriter&) = delete;
  GroupCommitWriter& operator=(const GroupCommitWriter&) = delete;

  // Enqueues `op` and blocks until its group has committed or failed (the
  // wake-up comes from a completion thread, so that the writer moves on).
  // Returns the op's own status, or the group's storage error (STORE_BUSY
  // from BEGIN, STORE_FULL from COMMIT, ...) in which case nothing of the op
  // was committed. Thread-safe.
  absl::Status Run(Op op);

  // Enqueues `op` and returns at once. `done` runs exactly once, after the
  // group has committed or failed, on a completion thread (never on the
  // caller's thread and never on the writer thread, which moves on to the
  // next group): the callbacks of one group run in order on one thread.
  // Thread-safe.
  void Submit(Op op, Done done);

  Stats stats() const;
  // Operations enqueued and not yet taken by the writer (for tests).
  int queued() const;

 private:
  struct Pending {
    Op op;
    absl::Status result;
    Done callback;            // Submit(): owned by the writer, deleted after
    absl::Notification done;  // Run(): each caller sleeps on its own
    // Run() from one of this writer's completion threads: woken by the
    // writer itself, since the completion threads may all be waiting.
    bool wake_from_writer = false;
  };

  enum class Ran {
    kAll,              // every op ran; failed ones left nothing behind
    kLost,             // the transaction is gone; every result is set
    kNeedsSavepoints,  // an op failed after writing (savepoints off)
  };

  void Enqueue(Pending* pending);
  // Runs the group's ops inside the open transaction, each in a savepoint
  // when `savepoints`; otherwise stops at the first op that failed after
  // writing.
  Ran RunOps(std::deque<Pending*>& group, bool savepoints);
  void Loop();
  // True when the group's transaction committed (some of its ops may still
  // have failed alone, their writes undone).
  bool CommitGroup(std::deque<Pending*>& group);
  void Complete();

  std::unique_ptr<Connection> conn_;  // used by the writer thread only
  const int max_group_size_;
  const CommitObserver observer_;  // before thread_, which reads it
  const RollbackHook on_rollback_;
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when queue_ becomes non-empty
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;

  // Submit() callbacks of committed groups, one batch per group.
  absl::Mutex completion_mu_;
  absl::CondVar completion_ready_;
  std::deque<std::vector<Pending*>> completions_
      ABSL_GUARDED_BY(completion_mu_);
  bool completion_stopping_ ABSL_GUARDED_BY(completion_mu_) = false;
  std::vector<std::thread> completion_threads_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_GROUP_COMMIT_H_
