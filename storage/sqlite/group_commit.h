// Group commit on SQLite (storage/group_commit_writer.h has the mechanism):
// one writer thread, one BEGIN IMMEDIATE ... COMMIT (hence one WAL sync) per
// group of queued operations.
#ifndef HUB_STORAGE_SQLITE_GROUP_COMMIT_H_
#define HUB_STORAGE_SQLITE_GROUP_COMMIT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "storage/group_commit_writer.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage {

// The writer's view of a SQLite connection.
struct SqliteGroupEngine {
  using Connection = storage::Connection;
  static constexpr const char* kThreadName = "hub-writer";
  // A commit here is CPU and a local sync: a handler's thread may lead the
  // writer under load (CommitOnThisThread).
  static constexpr bool kCallersLead = true;
  static absl::Status Ready(std::unique_ptr<Connection>&) {
    return absl::OkStatus();
  }
  static absl::Status Begin(Connection& conn) {
    return Exec(conn, "BEGIN IMMEDIATE");
  }
  // SQLite answers in-process: no COMMIT's answer is lost in transit, and
  // an error (a full disk, a failed sync) is taken as "did not commit".
  static absl::Status Commit(Connection& conn) { return Exec(conn, "COMMIT"); }
  // Transaction control through the connection's prepared-statement cache.
  static absl::Status Exec(Connection& conn, const char* sql);
  static GroupTransaction State(Connection& conn);
  static int64_t Changes(Connection& conn);
  // In-process calls: nothing to gain from sending statements ahead.
  struct First {};
  static void Prefetch(Connection&, const std::vector<const First*>&) {}
};

extern template class BasicGroupCommitWriter<SqliteGroupEngine>;
using GroupCommitWriter = BasicGroupCommitWriter<SqliteGroupEngine>;

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_GROUP_COMMIT_H_
