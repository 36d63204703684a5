// The SQLite side of a copy into PostgreSQL (hubctl db copy): a hub or
// triflux database file opened for reading on one consistent snapshot, at
// hub's current SQLite schema, without ever writing to the file.
//
// A file at hub's current schema is read in place, inside one read
// transaction. A file that needs migration (a triflux file, an older hub's)
// is first copied as of one moment (VACUUM INTO) into a private temporary
// directory, and that copy is migrated and read; the user's file stays
// byte for byte as it was. While open, the source holds the file's
// DatabaseLock, so no hubd can start on it, and it refuses a file a running
// hubd holds. Not responsible for anything on the PostgreSQL side.
#ifndef HUB_STORAGE_PG_COPY_SOURCE_H_
#define HUB_STORAGE_PG_COPY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/sqlite/database_lock.h"
#include "storage/sqlite/migrations.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage::pg {

struct CopySourceOptions {
  std::string path;  // the SQLite database file
  // Where a snapshot to migrate is made (default $TMPDIR, else /tmp); it
  // needs room for a compacted copy of the database.
  std::string temp_dir;
  // Stamps the migration's repairs of the snapshot; default: system clock.
  std::function<int64_t()> now_ms;
};

class CopySource {
 public:
  // Opens `options.path` for the copy. Errors, each naming the file:
  // NOT_FOUND / STORE_NOT_FOUND (no such file), FAILED_PRECONDITION /
  // DATABASE_LOCKED (a hubd holds it: stop it, or copy a `hubctl backup`),
  // STORE_NOT_SQLITE, STORE_CORRUPT (quick_check), SCHEMA_TOO_NEW (a newer
  // hub or triflux wrote it), STORE_UNRECOGNIZED (no hub or triflux data);
  // the store's reasons for I/O failures.
  static absl::StatusOr<std::unique_ptr<CopySource>> Open(
      const CopySourceOptions& options);
  // Ends the read transaction, removes any snapshot, releases the lock.
  ~CopySource();
  CopySource(const CopySource&) = delete;
  CopySource& operator=(const CopySource&) = delete;

  // The connection to read from, inside its read transaction: every read
  // sees the same snapshot.
  storage::Connection& conn() { return *conn_; }
  // The versions found in the file; migrated() says whether a snapshot was
  // migrated (false: the file was read in place).
  const MigrationReport& migration() const { return migration_; }
  bool migrated() const { return !snapshot_dir_.empty(); }

  // The file's tables that are not in `known` (nor SQLite's or _meta), with
  // their row counts: triflux's own tables, which a copy leaves behind.
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> OtherTables(
      const std::vector<std::string>& known);

 private:
  CopySource() = default;
  absl::Status Snapshot(const CopySourceOptions& options);

  std::unique_ptr<DatabaseLock> lock_;  // null when no lock file can exist
  std::unique_ptr<storage::Connection> conn_;
  MigrationReport migration_;
  std::string snapshot_dir_;  // "" when read in place
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_COPY_SOURCE_H_
