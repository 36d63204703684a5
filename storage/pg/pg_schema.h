// Creating and migrating hub's schema in a PostgreSQL database: the tables
// of storage/pg/schema.sql, versioned in hub_meta.hub_schema_version like
// SQLite's _meta, migrated in one transaction under an advisory lock so that
// several hubs starting at once over one database migrate it exactly once.
// A database of a newer version is refused, never downgraded.
#ifndef HUB_STORAGE_PG_PG_SCHEMA_H_
#define HUB_STORAGE_PG_PG_SCHEMA_H_

#include <optional>

#include "absl/status/statusor.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

// The schema version this hub writes and understands. 1: the tables of
// storage/sqlite/schema.sql at SQLite's hub_schema_version 6; 2: the path
// reservation tables (SQLite's 7); 3: the agent index over unacked inbox
// rows only, and what stops counting in an inbox in hub_inbox_settled; 4:
// the reservation change log (SQLite's 8); 5: waiting reserves (SQLite's
// 9); 6: what a waiter waits behind (SQLite's 10); 7: a pattern row's
// mode and the partial index of exclusive patterns (SQLite's 11); 8: the
// inbox count triggers find a message and its rows by key, not through the
// partial indexes of pending rows; 9: the inbox count triggers skip a
// session that keeps the counts in its statements (a hub's writer); 10:
// the agents' and messages' enumerated columns are domains, not table
// CHECKs; 11: jobs (assign_jobs, hub_job_dependencies,
// hub_job_late_results; SQLite's 12); 12: who held each attempt
// (hub_job_attempts; SQLite's 13).
inline constexpr int kPgSchemaVersion = 12;
// The triflux schema version whose tables these mirror (StoreInfo's
// schema_version, as SQLite's kTrifluxSchemaVersion).
inline constexpr int kPgTrifluxSchemaVersion = 8;

struct PgMigrationReport {
  std::optional<int> from_version;  // nullopt: an empty database
  int to_version = kPgSchemaVersion;
  bool changed = false;  // false: it was current already
};

// Brings the database `conn` is connected to up to kPgSchemaVersion.
// FAILED_PRECONDITION / SCHEMA_TOO_NEW for a newer database,
// STORE_UNRECOGNIZED for a version that is no number; the store's reasons
// otherwise (pg_conn.h). Nothing is changed when it fails.
// REQUIRES: `conn` is idle (no transaction open).
absl::StatusOr<PgMigrationReport> MigratePostgres(Connection& conn);

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_SCHEMA_H_
