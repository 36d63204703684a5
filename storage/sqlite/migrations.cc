#include "storage/sqlite/migrations.h"

#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {
namespace {

struct Seam {
  const char* table;
  const char* column;
  const char* definition;
};

// TRIFLUX-HUB.md §1.2. Added only where the table exists and lacks the
// column; run before schema.sql (whose indexes need them) and after it.
constexpr Seam kSeams[] = {
    {"agents", "project_id", "TEXT"},
    {"agents", "session_id", "TEXT"},
    {"agents", "host_id", "TEXT"},
    {"agents", "transport_locators_json", "TEXT NOT NULL DEFAULT '[]'"},
    {"messages", "role_key_wire", "TEXT"},
    {"agents", "presence_generation", "INTEGER NOT NULL DEFAULT 0"},
    {"assign_jobs", "dispatched_at_ms", "INTEGER"},
    {"reflexion_entries", "type", "TEXT NOT NULL DEFAULT 'reflexion'"},
    {"reflexion_entries", "adaptive_state_json", "TEXT NOT NULL DEFAULT '{}'"},
    // hub's own additive columns.
    {"agents", "lease_ttl_ms", "INTEGER"},
    {"hub_closed_scopes", "dead_lettered_count",
     "INTEGER CHECK (dead_lettered_count >= 0)"},
    // hub_schema_version 10: what a waiter waits behind.
    {"hub_reservation_waiters", "waits_for", "TEXT NOT NULL DEFAULT ''"},
    {"hub_reservation_changes", "waits_for", "TEXT NOT NULL DEFAULT ''"},
    // 11: a pattern row's mode (idx_hub_reservation_patterns_exclusive).
    {"hub_reservation_patterns", "exclusive",
     "INTEGER NOT NULL DEFAULT 1 CHECK (exclusive IN (0, 1))"},
    // 12: jobs (schema.sql) on a triflux assign_jobs table: triflux's
    // columns that hub reads, for a table from before one of them, then
    // hub's own.
    {"assign_jobs", "topic", "TEXT NOT NULL DEFAULT 'assign.job'"},
    {"assign_jobs", "task", "TEXT NOT NULL DEFAULT ''"},
    {"assign_jobs", "payload_json", "TEXT NOT NULL DEFAULT '{}'"},
    {"assign_jobs", "attempt", "INTEGER NOT NULL DEFAULT 1"},
    {"assign_jobs", "retry_count", "INTEGER NOT NULL DEFAULT 0"},
    {"assign_jobs", "max_retries", "INTEGER NOT NULL DEFAULT 0"},
    {"assign_jobs", "priority", "INTEGER NOT NULL DEFAULT 5"},
    {"assign_jobs", "ttl_ms", "INTEGER NOT NULL DEFAULT 600000"},
    {"assign_jobs", "timeout_ms", "INTEGER NOT NULL DEFAULT 600000"},
    {"assign_jobs", "deadline_ms", "INTEGER"},
    {"assign_jobs", "trace_id", "TEXT"},
    {"assign_jobs", "correlation_id", "TEXT"},
    {"assign_jobs", "result_json", "TEXT"},
    {"assign_jobs", "error_json", "TEXT"},
    {"assign_jobs", "created_at_ms", "INTEGER NOT NULL DEFAULT 0"},
    {"assign_jobs", "started_at_ms", "INTEGER"},
    {"assign_jobs", "completed_at_ms", "INTEGER"},
    {"assign_jobs", "last_retry_at_ms", "INTEGER"},
    {"assign_jobs", "hub_state", "TEXT"},
    {"assign_jobs", "project_id", "TEXT"},
    {"assign_jobs", "supervisor_role_wire", "TEXT"},
    {"assign_jobs", "worker_kind", "TEXT NOT NULL DEFAULT 'agent'"},
    {"assign_jobs", "worker_role_wire", "TEXT"},
    {"assign_jobs", "pool_filter_json", "TEXT"},
    {"assign_jobs", "retry_policy_json", "TEXT"},
    {"assign_jobs", "on_dependency_failure", "TEXT NOT NULL DEFAULT 'cancel'"},
    {"assign_jobs", "idempotency_key", "TEXT"},
    {"assign_jobs", "attempt_worker", "TEXT"},
    {"assign_jobs", "attempt_generation", "INTEGER"},
    {"assign_jobs", "attempt_role_epoch", "INTEGER"},
    {"assign_jobs", "not_before_ms", "INTEGER"},
    {"assign_jobs", "cancel_requested", "INTEGER NOT NULL DEFAULT 0"},
    {"assign_jobs", "progress_json", "TEXT"},
};

// triflux's indexes that no hub query reads (schema.sql, "Only the indexes
// hub's queries use"): each would cost every publish or ack one more b-tree
// write. Dropped after schema.sql on every open; a triflux binary that opens
// the file again recreates them (its own IF NOT EXISTS), which is harmless.
constexpr const char* kRetiredIndexes[] = {
    "idx_messages_status",
    "idx_messages_to_agent",
    "idx_messages_correlation",
    "idx_messages_expires",
    "idx_messages_priority",
    "idx_inbox_message",
    // hub_schema_version 6: replaced by the partial indexes of pending
    // messages (idx_messages_expiry_pending, idx_messages_role_pending).
    "idx_messages_role_key",
    "idx_messages_pending_expiry",
};

absl::Status DropRetiredIndexes(Connection& conn) {
  for (const char* index : kRetiredIndexes) {
    absl::Status s = conn.Exec(absl::StrCat("DROP INDEX IF EXISTS ", index));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TableExists(Connection& conn, const char* table) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(table));
  return stmt->Step();
}

absl::StatusOr<bool> ColumnExists(Connection& conn, const char* table,
                                  const char* column) {
  absl::StatusOr<Stmt> stmt =
      conn.Prepare("SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(table)).Bind(2, absl::string_view(column));
  return stmt->Step();
}

absl::Status RunSeams(Connection& conn, bool* changed) {
  for (const Seam& seam : kSeams) {
    absl::StatusOr<bool> table = TableExists(conn, seam.table);
    if (!table.ok()) return table.status();
    if (!*table) continue;
    absl::StatusOr<bool> column = ColumnExists(conn, seam.table, seam.column);
    if (!column.ok()) return column.status();
    if (*column) continue;
    absl::Status s =
        conn.Exec(absl::StrCat("ALTER TABLE ", seam.table, " ADD COLUMN ",
                               seam.column, " ", seam.definition));
    if (!s.ok()) return s;
    *changed = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> MetaValue(Connection& conn,
                                                     const char* key) {
  absl::StatusOr<bool> meta = TableExists(conn, "_meta");
  if (!meta.ok()) return meta.status();
  if (!*meta) return std::optional<std::string>();
  absl::StatusOr<Stmt> stmt =
      conn.Prepare("SELECT value FROM _meta WHERE key = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(key));
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<std::string>();
  return stmt->OptText(0);
}

absl::Status CheckNotNewer(const std::optional<std::string>& stored,
                           int supported, absl::string_view what) {
  if (!stored.has_value()) return absl::OkStatus();
  int version = 0;
  if (!absl::SimpleAtoi(*stored, &version) || version < 0) {
    return FailedPreconditionError(
        "STORE_UNRECOGNIZED",
        absl::StrCat("_meta.", what, " is '", *stored,
                     "', not a version number this hub understands"));
  }
  if (version > supported) {
    return FailedPreconditionError(
        "SCHEMA_TOO_NEW",
        absl::StrCat("database ", what, " ", version,
                     " is newer than the version this hub supports (",
                     supported, "); refusing to open it (no downgrade)"));
  }
  return absl::OkStatus();
}

absl::Status SetMeta(Connection& conn, const char* key, std::string value,
                     const std::optional<std::string>& current, bool* changed) {
  if (current == value) return absl::OkStatus();
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "INSERT INTO _meta(key, value) VALUES (?, ?) "
      "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(key)).Bind(2, absl::string_view(value));
  *changed = true;
  return stmt->Run();
}

// Pre-v8 tables had no CHECK: active rows without a holder are turned
// electable with the epoch fenced forward, as restart recovery does.
absl::StatusOr<int> RepairPhantomRoles(Connection& conn, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "UPDATE role_registry SET state = 'electable', "
      "epoch = epoch + 1, activation_seq = activation_seq + 1, "
      "activation_id = NULL, activation_deadline_ms = NULL, "
      "holder_lease_expires_ms = NULL, charter_acked_epoch = NULL, "
      "last_transition_ms = ?, last_reason = 'migration_phantom_active', "
      "version = version + 1 "
      "WHERE state = 'active' AND holder_agent_id IS NULL");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms);
  absl::Status s = stmt->Run();
  if (!s.ok()) return s;
  return static_cast<int>(conn.Changes());
}

// Jobs a triflux binary wrote (no hub_state) get the state their status
// names, and the project of their worker (else supervisor) agent, so hub's
// claims and lists find them; a running one's attempt is bound to its
// worker at the worker's generation now, so that worker can finish it and
// its leaving re-queues it (docs/design/jobs.md, "Tables").
absl::Status AdoptTrifluxJobs(Connection& conn, bool* changed) {
  absl::Status s = conn.Exec(
      "UPDATE assign_jobs SET hub_state = CASE WHEN status IN ('queued', "
      "'running', 'succeeded', 'failed', 'timed_out') THEN status ELSE "
      "'failed' END, project_id = COALESCE(project_id, (SELECT a.project_id "
      "FROM agents a WHERE a.agent_id = assign_jobs.worker_agent), (SELECT "
      "a.project_id FROM agents a WHERE a.agent_id = "
      "assign_jobs.supervisor_agent)), attempt_worker = CASE WHEN status = "
      "'running' THEN worker_agent END, attempt_generation = CASE WHEN status "
      "= 'running' THEN (SELECT a.presence_generation FROM agents a WHERE "
      "a.agent_id = assign_jobs.worker_agent) END WHERE hub_state IS NULL");
  if (!s.ok()) return s;
  if (conn.Changes() > 0) *changed = true;
  return absl::OkStatus();
}

absl::Status MigrateInTransaction(Connection& conn, int64_t now_ms,
                                  MigrationReport* report) {
  bool changed = false;
  absl::StatusOr<bool> had_roles = TableExists(conn, "role_registry");
  if (!had_roles.ok()) return had_roles.status();
  absl::Status s = RunSeams(conn, &changed);
  if (!s.ok()) return s;
  // PRAGMA schema_version (SQLite's schema cookie) changes with any DDL.
  absl::StatusOr<std::optional<std::string>> cookie_before =
      conn.QueryText("PRAGMA schema_version");
  if (!cookie_before.ok()) return cookie_before.status();
  s = conn.Exec(kSchemaSql);
  if (!s.ok()) return s;
  s = DropRetiredIndexes(conn);
  if (!s.ok()) return s;
  s = RunSeams(conn, &changed);
  if (!s.ok()) return s;
  s = AdoptTrifluxJobs(conn, &changed);
  if (!s.ok()) return s;
  absl::StatusOr<std::optional<std::string>> cookie_after =
      conn.QueryText("PRAGMA schema_version");
  if (!cookie_after.ok()) return cookie_after.status();
  if (*cookie_before != *cookie_after) changed = true;
  const std::optional<std::string>& from = report->from_schema_version;
  int from_version = kTrifluxSchemaVersion;
  if (from.has_value() && !absl::SimpleAtoi(*from, &from_version)) {
    from_version = kTrifluxSchemaVersion;  // unreadable: treat as current
  }
  if (*had_roles && from_version < kTrifluxSchemaVersion) {
    absl::StatusOr<int> repaired = RepairPhantomRoles(conn, now_ms);
    if (!repaired.ok()) return repaired.status();
    report->phantom_roles_repaired = *repaired;
  }
  s = SetMeta(conn, "schema_version", std::to_string(kTrifluxSchemaVersion),
              from, &changed);
  if (!s.ok()) return s;
  s = SetMeta(conn, "hub_schema_version", std::to_string(kHubSchemaVersion),
              report->from_hub_schema_version, &changed);
  if (!s.ok()) return s;
  report->migrated = changed;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSqliteHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::OkStatus();  // absent: a fresh database
  char header[16] = {};
  in.read(header, sizeof(header));
  std::streamsize n = in.gcount();
  if (n == 0) return absl::OkStatus();  // empty file: SQLite treats as new
  if (n < 16 || std::memcmp(header, "SQLite format 3\0", 16) != 0) {
    return FailedPreconditionError(
        "STORE_NOT_SQLITE",
        absl::StrCat(path,
                     " is not a SQLite database (bad header); "
                     "refusing to open it"));
  }
  return absl::OkStatus();
}

absl::Status CheckIntegrityAndVersion(Connection& conn,
                                      MigrationReport* report) {
  absl::StatusOr<Stmt> check = conn.Prepare("PRAGMA quick_check");
  if (!check.ok()) return check.status();
  std::string problems;
  while (true) {
    absl::StatusOr<bool> row = check->Step();
    if (!row.ok()) {
      return FailedPreconditionError(
          "STORE_CORRUPT",
          absl::StrCat("PRAGMA quick_check failed: ", row.status().message()));
    }
    if (!*row) break;
    std::string line = check->Text(0);
    if (line != "ok")
      absl::StrAppend(&problems, problems.empty() ? "" : "; ", line);
  }
  if (!problems.empty()) {
    return FailedPreconditionError(
        "STORE_CORRUPT",
        absl::StrCat("PRAGMA quick_check reported: ", problems.substr(0, 500)));
  }
  absl::StatusOr<std::optional<std::string>> version =
      MetaValue(conn, "schema_version");
  if (!version.ok()) return version.status();
  absl::StatusOr<std::optional<std::string>> hub_version =
      MetaValue(conn, "hub_schema_version");
  if (!hub_version.ok()) return hub_version.status();
  report->from_schema_version = *version;
  report->from_hub_schema_version = *hub_version;
  absl::Status s =
      CheckNotNewer(*version, kTrifluxSchemaVersion, "schema_version");
  if (!s.ok()) return s;
  s = CheckNotNewer(*hub_version, kHubSchemaVersion, "hub_schema_version");
  if (!s.ok()) return s;
  if (!version->has_value()) {
    absl::StatusOr<std::optional<std::string>> tables = conn.QueryText(
        "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "AND name <> '_meta' LIMIT 1");
    if (!tables.ok()) return tables.status();
    if (tables->has_value()) {
      return FailedPreconditionError(
          "STORE_UNRECOGNIZED",
          absl::StrCat("database has tables (e.g. '", **tables,
                       "') but no _meta.schema_version: not a triflux or hub "
                       "database; refusing to modify it"));
    }
  }
  return absl::OkStatus();
}

absl::Status Migrate(Connection& conn, int64_t now_ms,
                     MigrationReport* report) {
  absl::Status s = conn.Exec("BEGIN IMMEDIATE");
  if (!s.ok()) return s;
  s = MigrateInTransaction(conn, now_ms, report);
  if (!s.ok()) {
    conn.Exec("ROLLBACK").IgnoreError();
    return s;
  }
  s = conn.Exec("COMMIT");
  if (!s.ok()) conn.Exec("ROLLBACK").IgnoreError();
  return s;
}

}  // namespace hub::storage
