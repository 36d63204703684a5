#include "storage/sqlite/group_commit.h"

namespace hub::storage {

absl::Status SqliteGroupEngine::Exec(Connection& conn, const char* sql) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Run();
}

GroupTransaction SqliteGroupEngine::State(Connection& conn) {
  // SQLite ends a failed transaction itself (SQLITE_FULL, IOERR) or leaves
  // it usable; it has no failed-but-open state.
  return sqlite3_get_autocommit(conn.raw()) != 0 ? GroupTransaction::kGone
                                                 : GroupTransaction::kOpen;
}

int64_t SqliteGroupEngine::Changes(Connection& conn) {
  return sqlite3_total_changes64(conn.raw());
}

template class BasicGroupCommitWriter<SqliteGroupEngine>;

}  // namespace hub::storage
