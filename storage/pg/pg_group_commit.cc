#include "storage/pg/pg_group_commit.h"

namespace hub::storage::pg {

absl::Status PgGroupEngine::Ready(std::unique_ptr<Connection>& conn) {
  if (conn->Healthy()) return absl::OkStatus();
  return conn->Reconnect();
}

absl::Status PgGroupEngine::Exec(Connection& conn, const char* sql) {
  return conn.Run(sql).status();
}

GroupTransaction PgGroupEngine::State(Connection& conn) {
  if (!conn.Healthy()) return GroupTransaction::kGone;
  switch (conn.TransactionState()) {
    case Connection::Transaction::kOpen:
      return GroupTransaction::kOpen;
    case Connection::Transaction::kFailed:
      return GroupTransaction::kFailed;
    case Connection::Transaction::kIdle:
    case Connection::Transaction::kUnknown:
      return GroupTransaction::kGone;
  }
  return GroupTransaction::kGone;
}

}  // namespace hub::storage::pg

namespace hub::storage {
template class BasicGroupCommitWriter<pg::PgGroupEngine>;
}  // namespace hub::storage
