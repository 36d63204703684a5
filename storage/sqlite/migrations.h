// Opening a database file: preflight checks that write nothing, then the
// in-place migration from triflux schema v4..v8 (or a fresh file) to hub's
// schema, in one transaction. See docs/design/storage.md, "Migration path".
#ifndef HUB_STORAGE_SQLITE_MIGRATIONS_H_
#define HUB_STORAGE_SQLITE_MIGRATIONS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage {

// triflux-compatible version kept in _meta.schema_version.
inline constexpr int kTrifluxSchemaVersion = 8;
// hub's own schema version, kept in _meta.hub_schema_version. 2 added
// hub_agent_owners (agent ownership by authenticated principal), 3
// hub_closed_scopes (lead scopes closed for good), 4
// hub_closed_scopes.dead_lettered_count, 5 replaced triflux's message
// indexes that no hub query uses by idx_messages_pending_expiry, 6 replaced
// that and idx_messages_role_key by partial indexes of pending messages, 7
// added the path reservation tables (hub_reservation_tokens,
// hub_reservations, hub_reservation_patterns), 8 the reservation change
// log (hub_reservation_changes), 9 waiting reserves
// (hub_reservation_waiters), 10 what a waiter waits behind (their
// waits_for columns), 11 a pattern row's mode and the partial index of
// exclusive patterns, 12 jobs (assign_jobs served in place,
// hub_job_dependencies, hub_job_late_results), 13 who held each attempt
// (hub_job_attempts).
inline constexpr int kHubSchemaVersion = 13;

// schema.sql, embedded at build time (generated schema_sql.cc).
extern const char kSchemaSql[];

struct MigrationReport {
  std::optional<std::string> from_schema_version;  // nullopt: fresh file
  std::optional<std::string> from_hub_schema_version;
  bool migrated = false;  // the schema or version rows changed
  int phantom_roles_repaired = 0;
};

// Refuses, without writing anything, a file that is not a SQLite database
// (STORE_NOT_SQLITE). Call before opening a connection.
absl::Status CheckSqliteHeader(const std::string& path);

// Runs `PRAGMA quick_check` (STORE_CORRUPT unless "ok") and reads the stored
// versions; refuses a newer triflux or hub version (SCHEMA_TOO_NEW, naming
// both versions) and a non-empty database without hub/triflux metadata
// (STORE_UNRECOGNIZED). Reads only.
absl::Status CheckIntegrityAndVersion(Connection& conn,
                                      MigrationReport* report);

// Migrates in place in one BEGIN IMMEDIATE transaction: column seams,
// schema.sql, seams again, the v8 triggers, phantom-active repair for
// databases older than v8, version rows. Idempotent; run on every open.
// REQUIRES: CheckIntegrityAndVersion succeeded on `conn`.
absl::Status Migrate(Connection& conn, int64_t now_ms, MigrationReport* report);

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_MIGRATIONS_H_
