#include "storage/pg/pg_schema.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage::pg {

extern const char kPgSchemaSql[];  // storage/pg/schema.sql (BUILD genrule)

namespace {

// One key for every hub of every database on the server: taking it for the
// length of a migration transaction is cheap, and migrations are rare.
constexpr char kMigrationLock[] = "SELECT pg_advisory_xact_lock(7411062031)";

absl::StatusOr<std::optional<int>> StoredVersion(Connection& conn) {
  absl::StatusOr<Result> row =
      conn.Exec("SELECT value FROM hub_meta WHERE key = 'hub_schema_version'");
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return std::optional<int>();
  int version = 0;
  if (!absl::SimpleAtoi(row->Text(0, 0), &version) || version < 0) {
    return FailedPreconditionError(
        "STORE_UNRECOGNIZED",
        absl::StrCat("hub_meta.hub_schema_version is '", row->Text(0, 0),
                     "', not a version number this hub understands"));
  }
  return std::optional<int>(version);
}

absl::StatusOr<PgMigrationReport> MigrateIn(Connection& conn) {
  if (absl::StatusOr<Result> r = conn.Exec(kMigrationLock); !r.ok()) {
    return r.status();
  }
  if (absl::StatusOr<Result> r = conn.Exec(
          "CREATE TABLE IF NOT EXISTS hub_meta (key TEXT PRIMARY KEY, "
          "value TEXT NOT NULL)");
      !r.ok()) {
    return r.status();
  }
  absl::StatusOr<std::optional<int>> stored = StoredVersion(conn);
  if (!stored.ok()) return stored.status();
  PgMigrationReport report;
  report.from_version = *stored;
  if (stored->has_value() && **stored > kPgSchemaVersion) {
    return FailedPreconditionError(
        "SCHEMA_TOO_NEW",
        absl::StrCat("database hub_schema_version ", **stored,
                     " is newer than the version this hub supports (",
                     kPgSchemaVersion,
                     "); refusing to open it (no downgrade)"));
  }
  if (stored->has_value() && **stored == kPgSchemaVersion) return report;
  if (absl::StatusOr<Result> r = conn.Exec(kPgSchemaSql); !r.ok()) {
    return r.status();
  }
  if (absl::StatusOr<Result> r = conn.Query(
          "INSERT INTO hub_meta (key, value) VALUES ('hub_schema_version', $1) "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
          {absl::StrCat(kPgSchemaVersion)});
      !r.ok()) {
    return r.status();
  }
  report.changed = true;
  return report;
}

}  // namespace

absl::StatusOr<PgMigrationReport> MigratePostgres(Connection& conn) {
  if (absl::StatusOr<Result> r = conn.Exec("BEGIN"); !r.ok()) return r.status();
  absl::StatusOr<PgMigrationReport> report = MigrateIn(conn);
  if (!report.ok()) {
    (void)conn.Exec("ROLLBACK");
    return report.status();
  }
  if (absl::StatusOr<Result> r = conn.Exec("COMMIT"); !r.ok()) {
    return r.status();
  }
  return report;
}

}  // namespace hub::storage::pg
