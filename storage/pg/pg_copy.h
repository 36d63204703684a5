// Copying a hub or triflux SQLite database into PostgreSQL once, verified
// row for row (issue #18; `hubctl db copy`, docs/design/postgres.md).
//
// The copy migrates the target (MigratePostgres), then in ONE transaction:
// locks hub's tables, refuses a target that already holds hub data, copies
// every table of hub's schema (COPY FROM STDIN, or multi-row INSERTs sent
// in pipelines), advances message_inbox's identity past the copied ids,
// records where the data came from in hub_meta, and reads every row back,
// comparing each column's text with the SQLite row of the same key. Only
// then does it commit: a copy that fails anywhere, verification included,
// leaves the target as empty as it found it. Not responsible for the SQLite
// side's snapshot and migration (copy_source.h).
#ifndef HUB_STORAGE_PG_PG_COPY_H_
#define HUB_STORAGE_PG_PG_COPY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

// How rows travel. kCopy: COPY ... FROM STDIN in text format, streamed with
// PQputCopyData. kInsert: INSERTs of `batch_rows` rows each, several per
// pipeline (one round trip). Compared in docs/BENCHMARKS.md,
// "`hubctl db copy`: SQLite into PostgreSQL".
enum class CopyMethod { kCopy, kInsert };

struct CopyOptions {
  std::string sqlite_path;
  // A libpq connection URI (postgres://...) or key=value string. A password
  // is better left to PGPASSWORD or ~/.pgpass than put on a command line.
  std::string conninfo;
  CopyMethod method = CopyMethod::kCopy;
  int batch_rows = 1000;  // rows per INSERT (kInsert)
  // Where a snapshot of a file that needs migration goes (copy_source.h).
  std::string temp_dir;
  std::function<int64_t()> now_ms;  // default: system clock
  // Test only: runs inside the copy's transaction after the rows are
  // written and before they are verified (to prove verification reads).
  std::function<absl::Status(Connection&)> before_verify;
};

struct TableRows {
  std::string table;
  int64_t rows = 0;
};

struct CopyReport {
  std::string target;                   // the target without its password
  std::string from_schema_version;      // the SQLite file's, "" if absent
  std::string from_hub_schema_version;  // "" for a triflux file
  bool migrated_snapshot = false;       // a migrated temporary copy was read
  std::vector<TableRows> tables;        // hub's tables, copied and verified
  std::vector<TableRows> left_behind;   // the file's other tables (triflux's)
  int64_t rows = 0;                     // sum over `tables`
  absl::Duration copy_time;             // writing the rows
  absl::Duration verify_time;           // reading them back and comparing
};

// hub's tables in copy order (parents before the tables that reference
// them); hub_meta is not among them (its versions are PostgreSQL's own).
std::vector<std::string> CopiedTables();

// Copies `options.sqlite_path` into the database `options.conninfo` names.
// Errors: INVALID_ARGUMENT / STORE_URL_INVALID for a conninfo libpq cannot
// parse; UNAVAILABLE / STORE_UNAVAILABLE when the server cannot be reached;
// FAILED_PRECONDITION / TARGET_NOT_EMPTY (metadata `table`) when a hub
// table of the target holds rows or an earlier copy is recorded;
// DATA_LOSS / COPY_VERIFY_MISMATCH (metadata `table`, `key`, `column`)
// naming the first row that read back differently; the SQLite side's
// reasons (copy_source.h); the store's reasons for a row PostgreSQL refuses
// (metadata `table`). The target is unchanged on every error except that
// its schema may have been created.
absl::StatusOr<CopyReport> CopySqliteToPostgres(const CopyOptions& options);

// Compares, without writing, every table of hub's schema in the SQLite file
// with the PostgreSQL database: the same rows, counted and column for
// column. OK with per-table counts when equal; DATA_LOSS /
// COPY_VERIFY_MISMATCH naming the first difference otherwise; the errors of
// CopySqliteToPostgres for unreachable or unusable databases.
absl::StatusOr<CopyReport> VerifySqliteAgainstPostgres(
    const CopyOptions& options);

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_COPY_H_
