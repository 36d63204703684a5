// Group commit on PostgreSQL (storage/group_commit_writer.h has the
// mechanism): one writer connection per hub, one BEGIN ... COMMIT per group
// of queued operations, so a group costs one WAL flush however many callers
// it carries. In PostgreSQL any failed statement fails the whole
// transaction; the writer then replays the group with a savepoint per
// operation, so only the failing one is undone. The store's statements are
// written not to fail (guarded WHERE clauses, ON CONFLICT DO NOTHING), so a
// replay is the exception. A lost connection is reconnected before the next
// group.
#ifndef HUB_STORAGE_PG_PG_GROUP_COMMIT_H_
#define HUB_STORAGE_PG_PG_GROUP_COMMIT_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "storage/group_commit_writer.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

// The writer's view of a PostgreSQL connection.
struct PgGroupEngine {
  using Connection = pg::Connection;
  static constexpr const char* kThreadName = "hub-pg-writer";
  // READ COMMITTED: every fence is a guard in an UPDATE's WHERE clause,
  // which PostgreSQL re-checks on the newest row version after waiting for
  // a concurrent writer's lock, so two hubs cannot both pass one fence.
  static constexpr const char* kBegin = "BEGIN";
  static absl::Status Ready(std::unique_ptr<Connection>& conn);
  static absl::Status Exec(Connection& conn, const char* sql);
  static GroupTransaction State(Connection& conn);
  static int64_t Changes(Connection& conn) { return conn.total_changed(); }
};

using PgGroupCommitWriter = BasicGroupCommitWriter<PgGroupEngine>;

}  // namespace hub::storage::pg

namespace hub::storage {
extern template class BasicGroupCommitWriter<pg::PgGroupEngine>;
}  // namespace hub::storage

#endif  // HUB_STORAGE_PG_PG_GROUP_COMMIT_H_
