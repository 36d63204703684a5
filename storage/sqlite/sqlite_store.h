// SqliteStore: the Store on one SQLite file in WAL mode.
//
// Writes go through a GroupCommitWriter (one writer thread, one transaction
// and one sync per group, a savepoint per operation); reads use a pool of
// separate read-only connections, so they never wait behind a group. Open()
// checks and migrates the file first (storage/sqlite/migrations.h).
#ifndef HUB_STORAGE_SQLITE_SQLITE_STORE_H_
#define HUB_STORAGE_SQLITE_SQLITE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/sqlite/group_commit.h"
#include "storage/sqlite/migrations.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/store.h"

namespace hub::storage {

template <typename Engine, typename Rows, bool kOrderKeys>
class ReservationCalls;  // storage/reservation_store_calls.h
template <typename Engine, typename Rows>
class AgentCalls;  // storage/agent_store_calls.h
template <typename Engine, typename Rows>
class RoleCalls;  // storage/role_store_calls.h
template <typename Engine, typename Rows, bool kOrderKeys>
class MessageCalls;  // storage/message_store_calls.h
template <typename Engine, typename Rows>
class JobCalls;  // storage/job_store_calls.h
class SqliteRoleRows;
class SqliteMessageRows;

struct SqliteStoreOptions {
  std::string path;
  // PRAGMA synchronous. FULL (default) syncs the WAL on every commit, so an
  // acknowledged write survives power loss; NORMAL only survives a process
  // crash.
  enum class Synchronous { kOff, kNormal, kFull, kExtra };
  Synchronous synchronous = Synchronous::kFull;
  int busy_timeout_ms = 5000;
  // Operations per group commit; 1 = one transaction per write.
  int max_group_size = 512;
  // PRAGMA max_page_count when > 0: a size quota (writes past it fail with
  // STORE_FULL).
  int64_t max_page_count = 0;
  // Activation ids for reservations and recovery; default: UUIDv7.
  std::function<std::string()> new_id;
  // Wall clock in ms, used to stamp migration repairs; default: system clock.
  std::function<int64_t()> now_ms;
  // Told about every group commit (metrics); default: nothing.
  GroupCommitWriter::CommitObserver on_group_committed;
};

class SqliteStore final : public Store {
 public:
  // Opens (creating if absent) and migrates the database. Errors: see
  // store.h; nothing is written when a preflight check fails.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      SqliteStoreOptions options);
  ~SqliteStore() override;

  const MigrationReport& migration() const { return migration_; }
  WriteStats write_stats() const override { return writer_->stats(); }
  // Result rows the read methods have stepped through so far, over all
  // read connections (rows SQLite handed over, not rows it examined and
  // filtered out: the query plans bound those).
  int64_t rows_read() const {
    return rows_read_.load(std::memory_order_relaxed);
  }
  // Writes a consistent copy of the database, as of one moment, to `path`
  // (which must not exist) with VACUUM INTO on a read connection: writers go
  // on meanwhile. The copy is compact and in rollback-journal mode; hubd
  // opens it as is. Store errors (STORE_FULL, STORE_READ_ONLY,
  // STORE_UNAVAILABLE) name the cause.
  absl::Status BackupTo(const std::string& path) override;

  StoreInfo Info() const override { return info_; }
  AgentStore& agents() override { return *agents_; }
  RoleStore& roles() override { return *roles_; }
  MessageStore& messages() override { return *messages_; }
  ReservationStore& reservations() override { return *reservations_; }
  JobStore& jobs() override { return *jobs_; }

 private:
  // The reservation methods, over Read and Write.
  template <typename, typename, bool>
  friend class ReservationCalls;
  template <typename, typename>
  friend class AgentCalls;
  template <typename, typename>
  friend class JobCalls;
  // The role methods: RoleCalls over SqliteRoleRows, whose dead letters
  // keep pending_.
  template <typename, typename>
  friend class RoleCalls;
  friend class SqliteRoleRows;
  // The message methods: MessageCalls over SqliteMessageRows, which keep
  // pending_.
  template <typename, typename, bool>
  friend class MessageCalls;
  friend class SqliteMessageRows;
  // No hub shares a SQLite database: its writes have no seat.
  static std::optional<HubSeat> Seat() { return std::nullopt; }

  explicit SqliteStore(SqliteStoreOptions options)
      : options_(std::move(options)) {}

  // Runs `fn` as one operation of a group commit; its result is returned
  // only once committed. A non-OK result rolls back only this operation.
  template <typename T>
  absl::StatusOr<T> Write(std::function<absl::StatusOr<T>(Connection&)> fn) {
    return writer_->template RunFor<T>(std::move(fn));
  }
  // Write() without parking the caller: `done` gets the result on one of
  // the writer's completion threads once the group committed.
  template <typename T>
  void WriteAsync(std::function<absl::StatusOr<T>(Connection&)> fn,
                  Callback<T> done) {
    writer_->template SubmitFor<T>(std::move(fn), std::move(done));
  }
  absl::Status WriteStatus(std::function<absl::Status(Connection&)> fn) {
    return writer_->Run(std::move(fn));
  }
  // Runs `fn` on a pooled read-only connection.
  template <typename T>
  absl::StatusOr<T> Read(std::function<absl::StatusOr<T>(Connection&)> fn) {
    absl::StatusOr<std::unique_ptr<Connection>> conn = AcquireReader();
    if (!conn.ok()) return conn.status();
    const int64_t stepped = (*conn)->rows_stepped();
    absl::StatusOr<T> result = fn(**conn);
    rows_read_.fetch_add((*conn)->rows_stepped() - stepped,
                         std::memory_order_relaxed);
    ReleaseReader(std::move(*conn));
    return result;
  }
  absl::StatusOr<std::unique_ptr<Connection>> AcquireReader();
  void ReleaseReader(std::unique_ptr<Connection> conn);

  // Each agent's pending inbox rows (unacknowledged, message queued or
  // delivered), so that the inbox limit costs a publish a hash lookup
  // instead of a COUNT over the inbox. Used by write operations only, on the
  // writer thread, inside the transaction: an agent's entry is counted from
  // the database the first time a write needs it, and every write that
  // changes the number adjusts it after its statements succeeded. A write
  // that fails, or a group that does not commit, drops every entry.
  class PendingInboxCounts {
   public:
    absl::StatusOr<int64_t> Get(Connection& conn, absl::string_view agent_id);
    // Adjusts an entry that is present; absent ones are counted when needed.
    void Add(absl::string_view agent_id, int64_t delta);
    // The agents of `message_id`'s unacknowledged rows each lose one (the
    // message left queued|delivered).
    absl::Status MessageLeftPending(Connection& conn,
                                    absl::string_view message_id);
    void Clear() { counts_.clear(); }

   private:
    absl::flat_hash_map<std::string, int64_t> counts_;
  };

  SqliteStoreOptions options_;
  StoreInfo info_;
  MigrationReport migration_;
  PendingInboxCounts pending_;  // committing thread only; before writer_
  std::unique_ptr<GroupCommitWriter> writer_;
  // AgentCalls over SqliteAgentRows (storage/agent_store_calls.h).
  std::unique_ptr<AgentStore> agents_;
  // RoleCalls over SqliteRoleRows (storage/role_store_calls.h).
  std::unique_ptr<RoleStore> roles_;
  // MessageCalls over SqliteMessageRows (storage/message_store_calls.h).
  std::unique_ptr<MessageStore> messages_;
  // ReservationCalls over the engine's ReservationRows.
  std::unique_ptr<ReservationStore> reservations_;
  std::unique_ptr<ReservationStore> NewReservationStore();
  // JobCalls over SqliteJobRows (storage/job_store_calls.h).
  std::unique_ptr<JobStore> jobs_;
  std::atomic<int64_t> rows_read_{0};
  absl::Mutex readers_mu_;
  std::vector<std::unique_ptr<Connection>> idle_readers_
      ABSL_GUARDED_BY(readers_mu_);
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_STORE_H_
