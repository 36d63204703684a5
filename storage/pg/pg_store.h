// PostgresStore: the Store on a PostgreSQL database (issue #18), shared by
// any number of hubs.
//
// Writes go through a PgGroupCommitWriter (one writer connection, one
// transaction and one WAL flush per group, a savepoint per operation only
// when one failed); reads use a pool of separate connections, so they never
// wait behind a group. Every fence is a guard in the WHERE clause of the
// UPDATE that needs it and its changed-row count is checked: another hub may
// write the same rows at any time. Open() migrates the database first
// (storage/pg/pg_schema.h). See docs/design/postgres.md.
#ifndef HUB_STORAGE_PG_PG_STORE_H_
#define HUB_STORAGE_PG_PG_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "status/status.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_group_commit.h"
#include "storage/pg/pg_membership.h"
#include "storage/pg/pg_schema.h"
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
}  // namespace hub::storage

namespace hub::storage::pg {

struct PostgresStoreOptions {
  // A libpq connection string or URI; several hosts with
  // target_session_attrs=read-write work as libpq documents.
  std::string conninfo;
  // Operations per group commit; 1 = one transaction per write.
  int max_group_size = 512;
  // The writer's synchronous_commit: "on" (default) answers a write once
  // its commit is flushed on the primary (and on synchronous standbys when
  // the server has them); "off" may lose the last writes on a server crash.
  std::string synchronous_commit = "on";
  // Idle read connections kept for reuse.
  int max_idle_readers = 8;
  // Activation ids for reservations and recovery; default: UUIDv7.
  std::function<std::string()> new_id;
  // Wall clock in ms; default: system clock.
  std::function<int64_t()> now_ms;
  // Told about every group commit (metrics); default: nothing.
  PgGroupCommitWriter::CommitObserver on_group_committed;
  // The writer's idle_in_transaction_session_timeout (0: the server's):
  // how long a group's transaction may sit idle, its hub paused, before
  // the server ends it and frees its row locks. hubd: half its seat's
  // lease, so a paused hub never holds other hubs' writes up for longer.
  int64_t idle_in_transaction_timeout_ms = 0;
  // When set, the store has a membership (membership()) under this hub id,
  // and once it joined, every write for presence is fenced by its seat
  // (docs/design/multi-hub.md). Empty: no membership (tools, tests).
  std::string hub_id;
  // The writer's commits: how long a COMMIT whose answer was lost is looked
  // up, how often old commit ids are deleted, and tests' hooks.
  PgGroupEngineOptions commits;
};

class PostgresStore final : public Store {
 public:
  // Connects, migrates and opens. UNAVAILABLE / STORE_UNAVAILABLE when the
  // server cannot be reached; SCHEMA_TOO_NEW for a newer database.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(
      PostgresStoreOptions options);
  ~PostgresStore() override;

  const PgMigrationReport& migration() const { return migration_; }
  WriteStats write_stats() const override { return writer_->stats(); }

  StoreInfo Info() const override { return info_; }
  AgentStore& agents() override { return *agents_; }
  RoleStore& roles() override { return *roles_; }
  MessageStore& messages() override { return *messages_; }
  ReservationStore& reservations() override { return *reservations_; }
  JobStore& jobs() override { return *jobs_; }
  Membership* membership() override { return membership_.get(); }
  Signals* signals() override { return signals_.get(); }

 private:
  // The reservation methods, over Read and Write.
  template <typename, typename, bool>
  friend class ::hub::storage::ReservationCalls;
  // The agent methods: AgentCalls over PgAgentRows, registrations
  // pipelined (pg_store_agents.cc).
  template <typename, typename>
  friend class ::hub::storage::AgentCalls;
  friend class PgAgentStore;
  std::unique_ptr<AgentStore> NewAgentStore();
  // The role methods: RoleCalls over PgRoleRows, with PostgreSQL's
  // additions (pg_store_roles.cc).
  template <typename, typename>
  friend class ::hub::storage::RoleCalls;
  friend class PgRoleStore;
  std::unique_ptr<RoleStore> NewRoleStore();
  // The message methods: MessageCalls over PgMessageRows, with
  // PostgreSQL's additions (pg_store_messages.cc).
  template <typename, typename, bool>
  friend class ::hub::storage::MessageCalls;
  friend class PgMessageStore;
  std::unique_ptr<MessageStore> NewMessageStore();
  // The job methods: JobCalls over PgJobRows (pg_job_rows.h).
  template <typename, typename>
  friend class ::hub::storage::JobCalls;

  explicit PostgresStore(PostgresStoreOptions options)
      : options_(std::move(options)) {}

  // The seat writes for presence are fenced by: none before Join.
  std::optional<HubSeat> Seat() const {
    if (membership_ == nullptr) return std::nullopt;
    HubSeat seat = membership_->seat();
    if (seat.incarnation == 0) return std::nullopt;
    return seat;
  }

  // Runs `fn` as one operation of a group commit; its result is returned
  // only once committed. A non-OK result rolls back only this operation.
  template <typename T>
  absl::StatusOr<T> Write(std::function<absl::StatusOr<T>(Connection&)> fn,
                          std::string order_key = {}) {
    return writer_->template RunFor<T>(std::move(fn), std::move(order_key));
  }
  // Write() without parking the caller: `done` gets the result on one of
  // the writer's completion threads once the group committed.
  template <typename T>
  void WriteAsync(std::function<absl::StatusOr<T>(Connection&)> fn,
                  Callback<T> done, std::string order_key = {}) {
    writer_->template SubmitFor<T>(std::move(fn), std::move(done),
                                   std::move(order_key));
  }
  // WriteAsync() of a write that sends `first` before anything else: a
  // run of such writes next to each other in a group sends their first
  // statements in one round trip (storage/group_commit_writer.h); `then`
  // gets the statement and this one's answer.
  template <typename T>
  void WriteAsyncFirst(
      Statement first,
      std::function<absl::StatusOr<T>(const Statement&, absl::StatusOr<Result>,
                                      Connection&)>
          then,
      Callback<T> done, std::string order_key = {}) {
    auto statement = std::make_shared<const Statement>(std::move(first));
    writer_->template SubmitFor<T>(
        [statement, then = std::move(then)](Connection& conn) {
          return then(*statement, conn.RunFirst(*statement), conn);
        },
        std::move(done), std::move(order_key), statement);
  }
  absl::Status WriteStatus(std::function<absl::Status(Connection&)> fn,
                           std::string order_key = {}) {
    return writer_->Run(std::move(fn), std::move(order_key));
  }
  // Runs `fn` on a pooled read connection (autocommit: each statement sees
  // what was committed when it started). An idle pooled connection the
  // server closed meanwhile (a restart, a terminated backend, an idle
  // timeout) fails its first statement, and libpq may not have marked it
  // bad yet (after `pg_ctl stop -m immediate` it reads the server's
  // WARNING first): a read that answers STORE_UNAVAILABLE on a pooled
  // connection runs again, once, on a new one, so the pool's dead
  // connections never reach a caller; a connection that answered
  // STORE_UNAVAILABLE is never pooled again. So does a read on a pooled
  // connection whose server turned read-only meanwhile (no longer
  // Healthy(): an old primary fenced for a switchover, which no longer
  // sees the writes made on the promoted standby).
  template <typename T>
  absl::StatusOr<T> Read(std::function<absl::StatusOr<T>(Connection&)> fn) {
    bool pooled = false;
    absl::StatusOr<std::unique_ptr<Connection>> conn = AcquireReader(&pooled);
    if (!conn.ok()) return conn.status();
    absl::StatusOr<T> result = fn(**conn);
    auto lost = [&result] {
      return !result.ok() && ReasonOf(result.status()) == "STORE_UNAVAILABLE";
    };
    if (pooled && (lost() || !(*conn)->Healthy())) {
      conn = Connection::Open(options_.conninfo, kReaderName);
      if (!conn.ok()) return conn.status();
      result = fn(**conn);
    }
    if (!lost()) ReleaseReader(std::move(*conn));
    return result;
  }
  // What the server calls the readers' connections (application_name).
  static constexpr char kReaderName[] = "hubd reader";
  // An idle connection of the pool (`*pooled` true) or a new one.
  absl::StatusOr<std::unique_ptr<Connection>> AcquireReader(
      bool* pooled = nullptr);
  // Keeps a healthy idle connection for the next read; drops a broken one.
  void ReleaseReader(std::unique_ptr<Connection> conn);

  PostgresStoreOptions options_;
  StoreInfo info_;
  PgMigrationReport migration_;
  std::unique_ptr<PgGroupCommitWriter> writer_;
  std::unique_ptr<PgMembership> membership_;
  std::unique_ptr<AgentStore> agents_;
  std::unique_ptr<RoleStore> roles_;
  std::unique_ptr<MessageStore> messages_;
  // ReservationCalls over the engine's ReservationRows.
  std::unique_ptr<ReservationStore> reservations_;
  std::unique_ptr<ReservationStore> NewReservationStore();
  // JobCalls over PgJobRows.
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<Signals> signals_;
  absl::Mutex readers_mu_;
  std::vector<std::unique_ptr<Connection>> idle_readers_
      ABSL_GUARDED_BY(readers_mu_);
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_STORE_H_
