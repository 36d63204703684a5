// WalCheckpointer: checkpoints the WAL of the writer's database on a thread
// of its own.
//
// With SQLite's automatic checkpoint, the commit that takes the WAL past
// its threshold also copies the WAL's pages into the database file and syncs
// it, on the writer thread: that group, and every caller queued behind it,
// waits for the copy. Here the writer's commit only notices the size (a WAL
// hook, which replaces the automatic checkpoint) and wakes this thread,
// which runs a PASSIVE checkpoint on its own connection while the writer
// goes on committing groups (WAL mode lets a checkpoint and one writer run
// at once). Durability does not change: a commit is durable when its WAL
// frames are synced, checkpointed or not.
//
// A checkpoint can only let the WAL restart from its beginning once it has
// caught up with the last commit; under a steady stream of commits the
// background one never quite does, so when the WAL reaches
// kHardLimitFactor x the threshold the commit checkpoints itself, as SQLite
// would have (most pages are copied by then; it finishes the job and the
// next transaction reuses the file from its start).
#ifndef HUB_STORAGE_WAL_CHECKPOINTER_H_
#define HUB_STORAGE_WAL_CHECKPOINTER_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/sqlite_db.h"

namespace hub::storage {

class WalCheckpointer {
 public:
  static constexpr int kHardLimitFactor = 4;

  struct Stats {
    int64_t requested = 0;    // times the writer's WAL passed the threshold
    int64_t checkpoints = 0;  // by the checkpointer's thread
    int64_t failures = 0;     // of those, returned an error (retried later)
    int64_t by_writer = 0;    // run by a commit at the hard limit
  };

  // Opens its own connection to `path` and installs a WAL hook on `writer`
  // (the writer's connection, which must outlive this object): a commit
  // that leaves at least `threshold_pages` frames in the WAL wakes the
  // thread.
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(
      const std::string& path, sqlite3* writer, int threshold_pages,
      int busy_timeout_ms);
  // Removes the hook, then stops the thread and closes its connection (the
  // writer's connection, closed last, checkpoints what is left).
  ~WalCheckpointer();

  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  Stats stats() const;

 private:
  WalCheckpointer(std::unique_ptr<Connection> conn, sqlite3* writer,
                  int threshold_pages);
  // The WAL hook; runs on the writer thread after each commit.
  static int OnCommit(void* self, sqlite3* db, const char* schema, int pages);
  void Loop();

  const std::unique_ptr<Connection> conn_;  // the thread's own
  sqlite3* const writer_;
  const int threshold_pages_;
  mutable absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_WAL_CHECKPOINTER_H_
