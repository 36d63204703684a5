// Thin RAII layer over the SQLite C API: a connection with a cache of
// prepared statements, a statement cursor, and the mapping from SQLite result
// codes to hub's reason-coded statuses. No schema knowledge.
#ifndef HUB_STORAGE_SQLITE_SQLITE_DB_H_
#define HUB_STORAGE_SQLITE_SQLITE_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub::storage {

// Maps a SQLite result code (extended codes included) to a status with a
// reason: STORE_BUSY, STORE_READ_ONLY, STORE_UNAVAILABLE, STORE_FULL,
// STORE_CONSTRAINT, STORE_CORRUPT, STORE_NOT_SQLITE or STORE_INTERNAL.
absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context);

class Connection;

// A prepared statement borrowed from a Connection's cache. Binds are
// 1-based. Resets itself (and clears bindings) when destroyed.
class Stmt {
 public:
  Stmt(Connection* conn, sqlite3_stmt* stmt) : conn_(conn), stmt_(stmt) {}
  Stmt(Stmt&& other) : conn_(other.conn_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, absl::string_view v);
  Stmt& Bind(int i, const std::string& v) {
    return Bind(i, absl::string_view(v));
  }
  Stmt& Bind(int i, const char* v) { return Bind(i, absl::string_view(v)); }
  Stmt& Bind(int i, const std::optional<int64_t>& v);
  Stmt& Bind(int i, const std::optional<std::string>& v);
  Stmt& BindNull(int i);

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion, ignoring rows.
  absl::Status Run();

  int64_t Int(int col) const;
  std::string Text(int col) const;
  std::optional<int64_t> OptInt(int col) const;
  std::optional<std::string> OptText(int col) const;

 private:
  Connection* conn_;
  sqlite3_stmt* stmt_;
};

class Connection {
 public:
  // Opens `path` with `flags` (SQLITE_OPEN_*); no pragmas are set.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, int flags);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* raw() { return db_; }

  // Runs one or more statements with no parameters.
  absl::Status Exec(absl::string_view sql);
  // A cached prepared statement for `sql`; prepared on first use.
  absl::StatusOr<Stmt> Prepare(const char* sql);
  // Rows changed by the last statement.
  int64_t Changes() { return sqlite3_changes64(db_); }
  // The single integer/text result of `sql`, or nullopt when no row.
  absl::StatusOr<std::optional<std::string>> QueryText(const char* sql);
  // Result rows stepped on this connection so far (every statement).
  int64_t rows_stepped() const { return rows_stepped_; }

 private:
  friend class Stmt;
  explicit Connection(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  int64_t rows_stepped_ = 0;
  // By SQL text; looked up without copying it (a statement is prepared
  // once per connection, then found on every use).
  absl::flat_hash_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_DB_H_
