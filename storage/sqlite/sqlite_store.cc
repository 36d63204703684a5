// SqliteStore: open, reader pool, backup. Agents, roles, messages and
// reservations are the shared Calls over sqlite_agent_rows.cc,
// sqlite_role_rows.cc, sqlite_message_rows.cc and
// sqlite_store_reservations.cc.
#include "storage/sqlite/sqlite_store.h"

#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "status/status.h"
#include "storage/agent_store_calls.h"
#include "storage/job_store_calls.h"
#include "storage/message_store_calls.h"
#include "storage/role_store_calls.h"
#include "storage/sqlite/sqlite_agent_rows.h"
#include "storage/sqlite/sqlite_job_rows.h"
#include "storage/sqlite/sqlite_message_rows.h"
#include "storage/sqlite/sqlite_role_rows.h"
#include "storage/sqlite/sqlite_rows.h"

namespace hub::storage {
namespace {

const char* SynchronousPragma(SqliteStoreOptions::Synchronous s) {
  switch (s) {
    case SqliteStoreOptions::Synchronous::kOff:
      return "PRAGMA synchronous = OFF";
    case SqliteStoreOptions::Synchronous::kNormal:
      return "PRAGMA synchronous = NORMAL";
    case SqliteStoreOptions::Synchronous::kFull:
      return "PRAGMA synchronous = FULL";
    case SqliteStoreOptions::Synchronous::kExtra:
      return "PRAGMA synchronous = EXTRA";
  }
  return "PRAGMA synchronous = FULL";
}

std::string AbsolutePath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

std::string Fingerprint(const std::string& path) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(path.data()), path.size(),
         digest);
  return absl::StrCat(
      "sqlite:", absl::BytesToHexString(absl::string_view(
                     reinterpret_cast<const char*>(digest), sizeof(digest))));
}

// Connection pragmas for the writer (TRIFLUX-HUB.md §1.1; synchronous is a
// setting). journal_mode=WAL writes the file header, so it runs only after
// the preflight checks.
absl::Status ConfigureWriter(Connection& conn,
                             const SqliteStoreOptions& options) {
  absl::StatusOr<std::optional<std::string>> mode =
      conn.QueryText("PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != std::optional<std::string>("wal")) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("could not switch ", options.path, " to WAL mode (got ",
                     mode->value_or("nothing"), ")"));
  }
  absl::Status s = conn.Exec(absl::StrCat(
      "PRAGMA foreign_keys = ON; ", SynchronousPragma(options.synchronous),
      "; PRAGMA wal_autocheckpoint = 1000;"
      // Statement journals and temporary b-trees stay in memory: on disk
      // each one costs the writer a file create and unlink.
      " PRAGMA temp_store = MEMORY;"));
  if (!s.ok()) return s;
  if (options.max_page_count > 0) {
    s = conn.Exec(
        absl::StrCat("PRAGMA max_page_count = ", options.max_page_count));
  }
  return s;
}

// SQLite reports an unwritable directory as a generic CANTOPEN/IOERR (it
// retries read-only and fails with ENOENT): name the real cause.
absl::Status ExplainOpenFailure(const std::string& path, absl::Status s) {
  if (ReasonOf(s) != "STORE_UNAVAILABLE") return s;
  std::string dir = ".";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  if (access(dir.c_str(), F_OK) != 0) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("directory ", dir, " does not exist: ", s.message()));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return UnavailableError(
        "STORE_READ_ONLY",
        absl::StrCat("directory ", dir,
                     " is not writable (the database and its -wal/-shm files "
                     "live there): ",
                     s.message()));
  }
  return s;
}

}  // namespace

// ---- open ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    SqliteStoreOptions options) {
  if (!options.new_id) options.new_id = NewUuidV7;
  if (!options.now_ms) options.now_ms = SystemNowMs;
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(options)));
  const SqliteStoreOptions& opts = store->options_;

  absl::Status s = CheckSqliteHeader(opts.path);
  if (!s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(opts.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!conn.ok()) return ExplainOpenFailure(opts.path, conn.status());
  sqlite3_busy_timeout((*conn)->raw(), opts.busy_timeout_ms);
  if (sqlite3_db_readonly((*conn)->raw(), "main") == 1) {
    return UnavailableError(
        "STORE_READ_ONLY",
        absl::StrCat(opts.path, " can only be opened read-only"));
  }
  s = CheckIntegrityAndVersion(**conn, &store->migration_);
  if (!s.ok()) return ExplainOpenFailure(opts.path, s);
  s = ConfigureWriter(**conn, opts);
  if (!s.ok()) return ExplainOpenFailure(opts.path, s);
  s = Migrate(**conn, opts.now_ms(), &store->migration_);
  if (!s.ok()) return ExplainOpenFailure(opts.path, s);

  store->info_.store_type = "sqlite";
  store->info_.db_path = AbsolutePath(opts.path);
  store->info_.fingerprint = Fingerprint(store->info_.db_path);
  store->info_.schema_version = std::to_string(kTrifluxSchemaVersion);
  store->info_.hub_schema_version = std::to_string(kHubSchemaVersion);
  // Fail at open, not at the first read, if readers cannot open.
  absl::StatusOr<std::unique_ptr<Connection>> reader = store->AcquireReader();
  if (!reader.ok()) return reader.status();
  store->ReleaseReader(std::move(*reader));
  store->writer_ = std::make_unique<GroupCommitWriter>(
      std::move(*conn), opts.max_group_size, /*completion_threads=*/2,
      opts.on_group_committed,
      /*on_rollback=*/[raw = store.get()] { raw->pending_.Clear(); });
  store->agents_ =
      std::make_unique<AgentCalls<SqliteStore, SqliteAgentRows>>(*store);
  store->roles_ = std::make_unique<RoleCalls<SqliteStore, SqliteRoleRows>>(
      *store, opts.new_id);
  store->messages_ = std::make_unique<
      MessageCalls<SqliteStore, SqliteMessageRows, /*kOrderKeys=*/false>>(
      *store);
  store->reservations_ = store->NewReservationStore();
  store->jobs_ = std::make_unique<JobCalls<SqliteStore, SqliteJobRows>>(*store);
  return store;
}

SqliteStore::~SqliteStore() {
  // Readers first: the last connection to close checkpoints the WAL and
  // removes the -wal/-shm files, which a read-only connection cannot do.
  {
    absl::MutexLock lock(&readers_mu_);
    idle_readers_.clear();
  }
  writer_.reset();
}

absl::StatusOr<std::unique_ptr<Connection>> SqliteStore::AcquireReader() {
  {
    absl::MutexLock lock(&readers_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return conn;
    }
  }
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(options_.path, SQLITE_OPEN_READONLY);
  if (!conn.ok()) return conn.status();
  sqlite3_busy_timeout((*conn)->raw(), options_.busy_timeout_ms);
  return conn;
}

absl::Status SqliteStore::BackupTo(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Connection>> conn = AcquireReader();
  if (!conn.ok()) return conn.status();
  absl::Status status;
  {
    absl::StatusOr<Stmt> vacuum = (*conn)->Prepare("VACUUM INTO ?1");
    status = vacuum.ok() ? vacuum->Bind(1, path).Run() : vacuum.status();
  }
  ReleaseReader(std::move(*conn));
  return status;
}

void SqliteStore::ReleaseReader(std::unique_ptr<Connection> conn) {
  absl::MutexLock lock(&readers_mu_);
  if (idle_readers_.size() < 8) idle_readers_.push_back(std::move(conn));
}

// ---- rows ------------------------------------------------------------------

namespace rows {

std::string JsonStringArray(const std::vector<std::string>& values) {
  std::string out = "[";
  for (const std::string& v : values) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (unsigned char c : v) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        out += absl::StrFormat("\\u%04x", c);
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }
  out += ']';
  return out;
}

void BindList(Stmt& stmt, int index,
              const std::optional<std::vector<std::string>>& values) {
  if (values.has_value()) {
    stmt.Bind(index, JsonStringArray(*values));
  } else {
    stmt.BindNull(index);
  }
}

const char kAgentsPageSql[] =
    "SELECT " HUB_AGENT_COLUMNS
    " FROM agents WHERE agent_id > ?1 "
    "AND (?2 IS NULL OR cli IN (SELECT value FROM json_each(?2))) "
    "AND (?3 IS NULL OR project_id = ?3) "
    "AND (?4 IS NULL OR project_id IN (SELECT value FROM json_each(?4))) "
    "AND (?5 IS NULL OR CASE WHEN NOT json_valid(topics_json) THEN 0 "
    "WHEN json_type(topics_json) <> 'array' THEN 0 "
    "ELSE EXISTS (SELECT 1 FROM json_each(topics_json) "
    "WHERE type = 'text' AND value = ?5) END) "
    "ORDER BY agent_id LIMIT ?6";

AgentRecord ReadAgent(const Stmt& s) { return ReadAgentRow(s); }

}  // namespace rows

}  // namespace hub::storage
