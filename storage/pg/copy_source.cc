#include "storage/pg/copy_source.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "status/status.h"

namespace hub::storage::pg {
namespace {

// The same failure, its message prefixed with the file it concerns.
absl::Status About(const std::string& path, const absl::Status& cause) {
  const std::string reason = ReasonOf(cause);
  return ReasonError(
      cause.code(), reason.empty() ? "STORE_INTERNAL" : reason,
      absl::StrCat("SQLite database ", path, ": ", cause.message()));
}

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CopySource>> CopySource::Open(
    const CopySourceOptions& options) {
  const std::string& path = options.path;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return NotFoundError("STORE_NOT_FOUND",
                         absl::StrCat("no SQLite database file at ", path));
  }
  if (absl::Status s = CheckSqliteHeader(path); !s.ok()) return s;
  std::unique_ptr<CopySource> source(new CopySource());
  // hubd keeps state in memory as the file's only writer and goes on
  // writing after any snapshot: copying its live file would leave the
  // PostgreSQL copy behind the hub at once. A directory where no lock file
  // can be made (read-only) is one no hubd can hold either.
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock =
      DatabaseLock::Acquire(path, DatabaseHolder{"hubctl db copy", "", "", ""});
  if (lock.ok()) {
    source->lock_ = std::move(*lock);
  } else if (ReasonOf(lock.status()) == "DATABASE_LOCKED") {
    return ReasonError(
        lock.status().code(), "DATABASE_LOCKED",
        absl::StrCat(lock.status().message(),
                     "; stop that hubd first, or copy a consistent backup of "
                     "it (hubctl backup --out=FILE)"));
  }
  absl::StatusOr<std::unique_ptr<storage::Connection>> conn =
      storage::Connection::Open(path, SQLITE_OPEN_READONLY);
  if (!conn.ok()) return About(path, conn.status());
  source->conn_ = std::move(*conn);
  if (absl::Status s =
          CheckIntegrityAndVersion(*source->conn_, &source->migration_);
      !s.ok()) {
    return About(path, s);
  }
  const MigrationReport& found = source->migration_;
  if (!found.from_schema_version.has_value()) {
    return FailedPreconditionError(
        "STORE_UNRECOGNIZED",
        absl::StrCat("SQLite database ", path,
                     " holds no hub or triflux data (no _meta.schema_version)"
                     "; nothing to copy"));
  }
  const bool current =
      found.from_schema_version == std::to_string(kTrifluxSchemaVersion) &&
      found.from_hub_schema_version == std::to_string(kHubSchemaVersion);
  if (!current) {
    if (absl::Status s = source->Snapshot(options); !s.ok()) {
      return About(path, s);
    }
  }
  // One read transaction for every read of the copy and its verification;
  // its snapshot begins with the first read.
  if (absl::Status s = source->conn_->Exec("BEGIN"); !s.ok()) {
    return About(path, s);
  }
  absl::StatusOr<std::optional<std::string>> first =
      source->conn_->QueryText("SELECT count(*) FROM sqlite_master");
  if (!first.ok()) return About(path, first.status());
  return source;
}

absl::Status CopySource::Snapshot(const CopySourceOptions& options) {
  std::string base = options.temp_dir;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = absl::StrCat(base, "/hub-copy.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("cannot make a directory for the snapshot under ", base,
                     ": ", std::strerror(errno)));
  }
  snapshot_dir_ = pattern;
  const std::string file = snapshot_dir_ + "/snapshot.db";
  {
    absl::StatusOr<Stmt> vacuum = conn_->Prepare("VACUUM INTO ?1");
    if (!vacuum.ok()) return vacuum.status();
    if (absl::Status s = vacuum->Bind(1, file).Run(); !s.ok()) return s;
  }
  conn_.reset();  // done with the user's file
  absl::StatusOr<std::unique_ptr<storage::Connection>> conn =
      storage::Connection::Open(file, SQLITE_OPEN_READWRITE);
  if (!conn.ok()) return conn.status();
  conn_ = std::move(*conn);
  return Migrate(*conn_, options.now_ms ? options.now_ms() : SystemNowMs(),
                 &migration_);
}

CopySource::~CopySource() {
  if (conn_ != nullptr) conn_->Exec("ROLLBACK").IgnoreError();
  conn_.reset();
  if (!snapshot_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(snapshot_dir_, ignored);
  }
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
CopySource::OtherTables(const std::vector<std::string>& known) {
  std::vector<std::string> names;
  {
    absl::StatusOr<Stmt> list = conn_->Prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND "
        "name NOT LIKE 'sqlite_%' AND name <> '_meta' ORDER BY name");
    if (!list.ok()) return list.status();
    while (true) {
      absl::StatusOr<bool> row = list->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::string name = list->Text(0);
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        names.push_back(std::move(name));
      }
    }
  }
  std::vector<std::pair<std::string, int64_t>> others;
  for (const std::string& name : names) {
    const std::string quoted =
        absl::StrCat("\"", absl::StrReplaceAll(name, {{"\"", "\"\""}}), "\"");
    absl::StatusOr<std::optional<std::string>> count =
        conn_->QueryText(absl::StrCat("SELECT count(*) FROM ", quoted).c_str());
    if (!count.ok()) return count.status();
    others.emplace_back(name, count->has_value() ? std::stoll(**count) : 0);
  }
  return others;
}

}  // namespace hub::storage::pg
