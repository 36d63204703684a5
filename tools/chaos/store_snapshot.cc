#include "tools/chaos/store_snapshot.h"

#include <sqlite3.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/pg/pg_conn.h"

namespace hub::chaos {
namespace {

// The same statements on both engines: the tables and columns have the
// same names, and every value is read as text or an integer.
constexpr char kAgentsSql[] =
    "SELECT agent_id, presence_generation FROM agents";
constexpr char kInboxSql[] =
    "SELECT message_id, agent_id, "
    "CASE WHEN acked_at_ms IS NULL THEN 0 ELSE 1 END FROM message_inbox";
constexpr char kRolesSql[] =
    "SELECT role_key_wire, project_id, role_kind, scope_id, state, "
    "COALESCE(holder_agent_id, ''), epoch, version FROM role_registry";

// One row of any of the three statements, as the engine-neutral readers
// below fill the snapshot from it.
class Row {
 public:
  virtual ~Row() = default;
  virtual std::string Text(int column) const = 0;
  virtual int64_t Int(int column) const = 0;
};

void AddAgent(const Row& r, StoreSnapshot* s) {
  s->generations[r.Text(0)] = r.Int(1);
}
void AddInbox(const Row& r, StoreSnapshot* s) {
  s->inbox[{r.Text(0), r.Text(1)}] = r.Int(2) != 0;
}
void AddRole(const Row& r, StoreSnapshot* s) {
  StoredRole& role = s->roles[r.Text(0)];
  role.project_id = r.Text(1);
  role.role_kind = r.Text(2);
  role.scope_id = r.Text(3);
  role.state = r.Text(4);
  role.holder = r.Text(5);
  role.epoch = r.Int(6);
  role.version = r.Int(7);
}

struct Reader {
  const char* sql;
  void (*add)(const Row&, StoreSnapshot*);
};
constexpr Reader kReaders[] = {
    {kAgentsSql, AddAgent}, {kInboxSql, AddInbox}, {kRolesSql, AddRole}};

class SqliteRow : public Row {
 public:
  explicit SqliteRow(sqlite3_stmt* s) : s_(s) {}
  std::string Text(int column) const override {
    const unsigned char* t = sqlite3_column_text(s_, column);
    return t == nullptr ? "" : reinterpret_cast<const char*>(t);
  }
  int64_t Int(int column) const override {
    return sqlite3_column_int64(s_, column);
  }

 private:
  sqlite3_stmt* s_;
};

class PostgresRow : public Row {
 public:
  PostgresRow(const storage::pg::Result& r, int row) : r_(r), row_(row) {}
  std::string Text(int column) const override {
    return std::string(r_.Text(row_, column));
  }
  int64_t Int(int column) const override {
    return r_.Int(row_, column).value_or(0);
  }

 private:
  const storage::pg::Result& r_;
  const int row_;
};

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};

}  // namespace

absl::StatusOr<StoreSnapshot> ReadSqliteSnapshot(const std::string& path) {
  sqlite3* raw = nullptr;
  const int opened =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
  std::unique_ptr<sqlite3, DbCloser> db(raw);
  if (opened != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open ", path, ": ", raw ? sqlite3_errmsg(raw) : "?"));
  }
  sqlite3_busy_timeout(db.get(), 5000);
  StoreSnapshot snapshot;
  for (const Reader& reader : kReaders) {
    sqlite3_stmt* raw_stmt = nullptr;
    if (sqlite3_prepare_v2(db.get(), reader.sql, -1, &raw_stmt, nullptr) !=
        SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat(reader.sql, ": ", sqlite3_errmsg(db.get())));
    }
    std::unique_ptr<sqlite3_stmt, StmtFinalizer> stmt(raw_stmt);
    int step;
    while ((step = sqlite3_step(stmt.get())) == SQLITE_ROW) {
      reader.add(SqliteRow(stmt.get()), &snapshot);
    }
    if (step != SQLITE_DONE) {
      return absl::InternalError(
          absl::StrCat(reader.sql, ": ", sqlite3_errmsg(db.get())));
    }
  }
  return snapshot;
}

absl::StatusOr<StoreSnapshot> ReadPostgresSnapshot(
    storage::pg::Connection* conn) {
  if (absl::StatusOr<storage::pg::Result> begun =
          conn->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      !begun.ok()) {
    return begun.status();
  }
  StoreSnapshot snapshot;
  for (const Reader& reader : kReaders) {
    absl::StatusOr<storage::pg::Result> rows = conn->Exec(reader.sql);
    if (!rows.ok()) {
      (void)conn->Exec("ROLLBACK");
      return rows.status();
    }
    for (int i = 0; i < rows->rows(); ++i) {
      reader.add(PostgresRow(*rows, i), &snapshot);
    }
  }
  if (absl::StatusOr<storage::pg::Result> done = conn->Exec("COMMIT");
      !done.ok()) {
    return done.status();
  }
  return snapshot;
}

}  // namespace hub::chaos
