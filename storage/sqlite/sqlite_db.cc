#include "storage/sqlite/sqlite_db.h"

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {

absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context) {
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string msg = absl::StrCat(context, ": ", detail);
  int sys = db != nullptr ? sqlite3_system_errno(db) : 0;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError("STORE_BUSY",
                              absl::StrCat(msg,
                                           " (database is held by another "
                                           "connection or process)"));
    case SQLITE_READONLY:
      return UnavailableError("STORE_READ_ONLY", msg);
    case SQLITE_FULL:
      return ResourceExhaustedError("STORE_FULL", msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      if (sys == EACCES || sys == EROFS || sys == EPERM) {
        return UnavailableError("STORE_READ_ONLY", msg);
      }
      return UnavailableError("STORE_UNAVAILABLE", msg);
    case SQLITE_IOERR:
      if (sys == ENOSPC || sys == EDQUOT) {
        return ResourceExhaustedError("STORE_FULL", msg);
      }
      if (sys == EACCES || sys == EROFS || sys == EPERM) {
        return UnavailableError("STORE_READ_ONLY", msg);
      }
      return UnavailableError("STORE_UNAVAILABLE", msg);
    case SQLITE_CONSTRAINT:
      return FailedPreconditionError("STORE_CONSTRAINT", msg);
    case SQLITE_CORRUPT:
      return FailedPreconditionError("STORE_CORRUPT", msg);
    case SQLITE_NOTADB:
      return FailedPreconditionError("STORE_NOT_SQLITE", msg);
    default:
      return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL", msg);
  }
}

Stmt::~Stmt() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, absl::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::Bind(int i, const std::optional<int64_t>& v) {
  return v ? Bind(i, *v) : BindNull(i);
}
Stmt& Stmt::Bind(int i, const std::optional<std::string>& v) {
  return v ? Bind(i, absl::string_view(*v)) : BindNull(i);
}
Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

absl::StatusOr<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    conn_->rows_stepped_++;
    return true;
  }
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(conn_->raw(), rc, "step");
}

absl::Status Stmt::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(p),
                     sqlite3_column_bytes(stmt_, col));
}
std::optional<int64_t> Stmt::OptInt(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return Int(col);
}
std::optional<std::string> Stmt::OptText(int col) const {
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return Text(col);
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& path, int flags) {
  // SQLite counts every allocation in global statistics under one global
  // mutex, which every connection's thread then takes on every malloc and
  // free. Nothing reads those statistics. This only takes effect before
  // SQLite initializes itself, i.e. before the process's first open.
  static const bool configured [[maybe_unused]] =
      sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteStatus(db, rc, absl::StrCat("open ", path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Connection>(new Connection(db));
}

Connection::~Connection() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::Status Connection::Exec(absl::string_view sql) {
  std::string copy(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, copy.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, "exec");
  return absl::OkStatus();
}

absl::StatusOr<Stmt> Connection::Prepare(const char* sql) {
  auto it = cache_.find(absl::string_view(sql));
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt,
                                nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteStatus(db_, rc, absl::StrCat("prepare ", sql));
    }
    it = cache_.emplace(sql, stmt).first;
  }
  return Stmt(this, it->second);
}

absl::StatusOr<std::optional<std::string>> Connection::QueryText(
    const char* sql) {
  absl::StatusOr<Stmt> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<std::string>();
  return stmt->OptText(0);
}

}  // namespace hub::storage
