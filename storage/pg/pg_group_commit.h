// Group commit on PostgreSQL (storage/group_commit_writer.h has the
// mechanism): one writer connection per hub, one BEGIN ... COMMIT per group
// of queued operations, so a group costs one WAL flush however many callers
// it carries. In PostgreSQL any failed statement fails the whole
// transaction; the writer then replays the group with a savepoint per
// operation, so only the failing one is undone. The store's statements are
// written not to fail (guarded WHERE clauses, ON CONFLICT DO NOTHING), so a
// replay is the exception. A lost connection is reconnected before the next
// group.
//
// Every group transaction first records an id of its own in hub_commits,
// sent with BEGIN ahead of the group's first statement (one round trip for
// the three; a group that sends nothing sends no BEGIN and no COMMIT). When the
// connection breaks while COMMIT is in flight, the group may have committed or
// not; the writer reconnects and looks the id up (FindCommit), so that its
// callers hear OK if it did and STORE_UNAVAILABLE (nothing changed) if it did
// not. Only when the lookup itself fails in time do they get UNAVAILABLE /
// STORE_COMMIT_UNKNOWN. See docs/design/postgres.md, "Unknown commit outcomes".
#ifndef HUB_STORAGE_PG_PG_GROUP_COMMIT_H_
#define HUB_STORAGE_PG_PG_GROUP_COMMIT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/group_commit_writer.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

// How long a hub_commits row is kept: far longer than any group's
// transaction plus its lookup (seconds), since a row deleted before its
// lookup would read as "did not commit".
inline constexpr absl::Duration kCommitIdRetention = absl::Minutes(10);

struct PgGroupEngineOptions {
  // How long the writer keeps trying to learn a lost COMMIT's outcome
  // (reconnecting, waiting for the old transaction to end) before its
  // callers get STORE_COMMIT_UNKNOWN. The writer takes no other group
  // meanwhile.
  absl::Duration resolve_timeout = absl::Seconds(5);
  // Groups between two deletions of old hub_commits rows (each deletes at
  // most a few thousand, inside a group's transaction).
  int prune_every = 1024;
  // Tests only: run on the writer thread right before COMMIT is sent, and
  // after it was sent and before its answer is read.
  std::function<void(Connection&)> before_commit;
  std::function<void(Connection&)> after_commit_sent;
};

// The writer's view of a PostgreSQL connection.
class PgGroupEngine {
 public:
  using Connection = pg::Connection;
  static constexpr const char* kThreadName = "hub-pg-writer";
  // A commit here waits for the server's round trips, during which a
  // leading handler's thread (one of gRPC's) would read nothing: handlers
  // commit only on an idle writer, their own write alone.
  static constexpr bool kCallersLead = false;

  PgGroupEngine() = default;
  explicit PgGroupEngine(PgGroupEngineOptions options)
      : options_(std::move(options)) {}

  // Reconnects a connection that is not Healthy(), after reading what the
  // server sent while it was idle (which is how a closed one is noticed).
  static absl::Status Ready(std::unique_ptr<Connection>& conn);
  // BEGIN (READ COMMITTED: every fence is a guard in an UPDATE's WHERE
  // clause, which PostgreSQL re-checks on the newest row version after
  // waiting for a concurrent writer's lock, so two hubs cannot both pass one
  // fence) and the group's hub_commits row, queued to go out with the
  // group's first statement (Connection::BeginWith); every prune_every
  // groups, the deletion of old rows too. A failure of theirs is that
  // statement's answer, with the transaction rolled back.
  absl::Status Begin(Connection& conn);
  // COMMIT. An answer lost with the connection is looked up (FindCommit)
  // within resolve_timeout: OK if the group committed, the connection's
  // STORE_UNAVAILABLE if it did not, UNAVAILABLE / STORE_COMMIT_UNKNOWN if
  // that could not be learned. A COMMIT the server refused (a deferred
  // constraint, a serialization failure) is its error: rolled back.
  absl::Status Commit(Connection& conn);
  static absl::Status Exec(Connection& conn, const char* sql);
  static GroupTransaction State(Connection& conn);
  static int64_t Changes(Connection& conn) { return conn.total_changed(); }
  // An operation's first statement (storage/group_commit_writer.h), which
  // the operation runs with Connection::RunFirst on this very object.
  using First = std::shared_ptr<const Statement>;
  // Connection::Prefetch of those statements: one round trip for the run.
  static void Prefetch(Connection& conn, const std::vector<const First*>& run);

 private:
  PgGroupEngineOptions options_;
  std::string commit_id_;  // the open group's hub_commits id
  int64_t groups_ = 0;     // begun on this engine
};

// Whether the group transaction that inserted `commit_id` into hub_commits
// on an earlier connection committed: reconnects `conn` (closing the old
// socket, so the old backend ends) and inserts the same id in a transaction
// it rolls back. The insert waits for a transaction still holding that id
// (an old backend still busy with COMMIT, or not yet aware that its client
// is gone) to end, so "absent" is final: the old transaction can no longer
// commit. true: committed; false: it did not and never will. Retries until
// `deadline`; then the last failure (UNAVAILABLE or ABORTED / STORE_BUSY:
// the old transaction was still open). REQUIRES: the id was inserted, and
// its insert answered, before COMMIT was sent.
absl::StatusOr<bool> FindCommit(Connection& conn, const std::string& commit_id,
                                absl::Time deadline);

using PgGroupCommitWriter = BasicGroupCommitWriter<PgGroupEngine>;

}  // namespace hub::storage::pg

namespace hub::storage {
extern template class BasicGroupCommitWriter<pg::PgGroupEngine>;
}  // namespace hub::storage

#endif  // HUB_STORAGE_PG_PG_GROUP_COMMIT_H_
