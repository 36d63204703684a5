#include "storage/pg/pg_copy.h"

#include <postgresql/libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "status/status.h"
#include "storage/pg/copy_rows.h"
#include "storage/pg/copy_source.h"
#include "storage/pg/pg_schema.h"

namespace hub::storage::pg {
namespace {

// hub_meta keys a copy writes; the first also marks a target as copied to.
constexpr char kCopiedFrom[] = "copied_from_sqlite";

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The same failure with `table` named in its message and metadata.
absl::Status InTable(const std::string& table, const absl::Status& cause) {
  const std::string reason = ReasonOf(cause);
  absl::Status s =
      ReasonError(cause.code(), reason.empty() ? "STORE_INTERNAL" : reason,
                  absl::StrCat("copying table ", table, ": ", cause.message()));
  for (const auto& [k, v] : MetadataOf(cause)) s = WithMetadata(s, k, v);
  return WithMetadata(std::move(s), "table", table);
}

// The target as user@host:port/dbname (never its password), or
// INVALID_ARGUMENT / STORE_URL_INVALID.
absl::StatusOr<std::string> DescribeTarget(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? ConnInfoParseError(conninfo, error)
                                       : "out of memory";
    PQfreemem(error);
    return InvalidArgumentError(
        "STORE_URL_INVALID",
        absl::StrCat("not a PostgreSQL connection URI or key=value string: ",
                     why));
  }
  std::map<std::string, std::string> values;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return absl::StrCat(values.count("user") ? values["user"] + "@" : "",
                      values.count("host") ? values["host"] : "(default host)",
                      values.count("port") ? ":" + values["port"] : "", "/",
                      values.count("dbname") ? values["dbname"] : "");
}

// A table's columns in PostgreSQL's order (the target's schema decides what
// a copy carries), each checked to exist in the SQLite table.
absl::StatusOr<std::vector<std::string>> Columns(Connection& pg,
                                                 storage::Connection& sqlite,
                                                 const TableSpec& table) {
  absl::StatusOr<Result> r = pg.Query(
      "SELECT column_name FROM information_schema.columns WHERE "
      "table_schema = current_schema() AND table_name = $1 "
      "ORDER BY ordinal_position",
      {std::string(table.name)});
  if (!r.ok()) return r.status();
  std::vector<std::string> columns;
  for (int i = 0; i < r->rows(); ++i) {
    // Which hub holds an agent's presence exists only where hubs share a
    // database: a copied agent is held by none until it attaches.
    if (absl::string_view(table.name) == "agents" &&
        absl::StartsWith(r->Text(i, 0), "stream_hub_")) {
      continue;
    }
    columns.emplace_back(r->Text(i, 0));
    absl::StatusOr<Stmt> has =
        sqlite.Prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2");
    if (!has.ok()) return has.status();
    has->Bind(1, table.name).Bind(2, columns.back());
    absl::StatusOr<bool> found = has->Step();
    if (!found.ok()) return found.status();
    if (!*found) {
      return FailedPreconditionError(
          "STORE_UNRECOGNIZED",
          absl::StrCat("the SQLite table ", table.name, " has no column ",
                       columns.back(), " that PostgreSQL's has"));
    }
  }
  if (columns.empty()) {
    return FailedPreconditionError(
        "STORE_UNRECOGNIZED",
        absl::StrCat("the PostgreSQL database has no table ", table.name));
  }
  return columns;
}

// The target must hold no hub data: no row in any copied table, no earlier
// copy recorded. REQUIRES: the tables are locked by this transaction.
absl::Status CheckEmpty(Connection& pg) {
  for (const TableSpec& table : Tables()) {
    absl::StatusOr<Result> r =
        pg.Exec(absl::StrCat("SELECT EXISTS (SELECT 1 FROM ", table.name, ")"));
    if (!r.ok()) return r.status();
    if (r->Text(0, 0) == "t") {
      return WithMetadata(
          FailedPreconditionError(
              "TARGET_NOT_EMPTY",
              absl::StrCat("the PostgreSQL database already holds hub data "
                           "(table ",
                           table.name,
                           " has rows); a copy goes into an empty database "
                           "only: create a new one, or drop this one's hub "
                           "tables if its data is not wanted")),
          "table", table.name);
    }
  }
  absl::StatusOr<Result> r = pg.Query(
      "SELECT value FROM hub_meta WHERE key = $1", {std::string(kCopiedFrom)});
  if (!r.ok()) return r.status();
  if (r->rows() > 0) {
    return WithMetadata(
        FailedPreconditionError(
            "TARGET_NOT_EMPTY",
            absl::StrCat("the PostgreSQL database already received a copy "
                         "(from ",
                         r->Text(0, 0),
                         "); a copy goes into an empty database only")),
        "table", "hub_meta");
  }
  return absl::OkStatus();
}

// message_inbox's identity continues after the highest delivery id the
// SQLite file ever handed out (AUTOINCREMENT's sqlite_sequence remembers
// deleted ones too), so no id is reused.
absl::Status AdvanceIdentity(Connection& pg, storage::Connection& sqlite) {
  absl::StatusOr<std::optional<std::string>> has_sequence = sqlite.QueryText(
      "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'");
  if (!has_sequence.ok()) return has_sequence.status();
  absl::StatusOr<std::optional<std::string>> last = sqlite.QueryText(
      *has_sequence == std::optional<std::string>("1")
          ? "SELECT max(n) FROM (SELECT max(delivery_id) AS n FROM "
            "message_inbox UNION ALL SELECT seq FROM sqlite_sequence WHERE "
            "name = 'message_inbox')"
          : "SELECT max(delivery_id) FROM message_inbox");
  if (!last.ok()) return last.status();
  int64_t n = 0;
  if (!last->has_value() || !absl::SimpleAtoi(**last, &n) || n < 1) {
    return absl::OkStatus();
  }
  return pg
      .Query(
          "SELECT setval(pg_get_serial_sequence('message_inbox', "
          "'delivery_id'), $1)",
          {absl::StrCat(n)})
      .status();
}

absl::Status RecordProvenance(Connection& pg, const CopyOptions& options,
                              const CopyReport& report) {
  const std::pair<const char*, std::string> rows[] = {
      {kCopiedFrom, options.sqlite_path},
      {"copied_from_schema_version", report.from_schema_version},
      {"copied_from_hub_schema_version", report.from_hub_schema_version},
      {"copied_at_ms",
       absl::StrCat(options.now_ms ? options.now_ms() : SystemNowMs())}};
  for (const auto& [key, value] : rows) {
    if (absl::StatusOr<Result> r =
            pg.Query("INSERT INTO hub_meta (key, value) VALUES ($1, $2)",
                     {std::string(key), value});
        !r.ok()) {
      return r.status();
    }
  }
  return absl::OkStatus();
}

struct Session {
  std::unique_ptr<CopySource> source;
  std::unique_ptr<Connection> pg;
  std::vector<std::vector<std::string>> columns;  // per Tables() entry
  CopyReport report;
};

absl::StatusOr<Session> OpenBoth(const CopyOptions& options, bool migrate) {
  Session session;
  absl::StatusOr<std::string> target = DescribeTarget(options.conninfo);
  if (!target.ok()) return target.status();
  session.report.target = *target;
  absl::StatusOr<std::unique_ptr<CopySource>> source =
      CopySource::Open({options.sqlite_path, options.temp_dir, options.now_ms});
  if (!source.ok()) return source.status();
  session.source = std::move(*source);
  absl::StatusOr<std::unique_ptr<Connection>> pg =
      Connection::Open(options.conninfo, "hub copy");
  if (!pg.ok()) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("PostgreSQL ", *target, ": ", pg.status().message()));
  }
  session.pg = std::move(*pg);
  // No NOTICEs on stderr (MigratePostgres's "already exists, skipping").
  if (absl::StatusOr<Result> r =
          session.pg->Exec("SET client_min_messages = warning");
      !r.ok()) {
    return r.status();
  }
  if (migrate) {
    absl::StatusOr<PgMigrationReport> migrated = MigratePostgres(*session.pg);
    if (!migrated.ok()) return migrated.status();
  }
  const MigrationReport& found = session.source->migration();
  session.report.from_schema_version = found.from_schema_version.value_or("");
  session.report.from_hub_schema_version =
      found.from_hub_schema_version.value_or("");
  session.report.migrated_snapshot = session.source->migrated();
  // The reservation change log is history, not state (hubs read it from
  // its head), and waiters belong to calls in progress: neither copied nor
  // left behind.
  std::vector<std::string> known = CopiedTables();
  known.push_back("hub_reservation_changes");
  known.push_back("hub_reservation_waiters");  // calls in progress
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> others =
      session.source->OtherTables(known);
  if (!others.ok()) return others.status();
  for (auto& [name, rows] : *others) {
    session.report.left_behind.push_back({name, rows});
  }
  return session;
}

// Verifies every table inside the transaction open on `s.pg`.
absl::Status VerifyAll(Session& s) {
  const absl::Time start = absl::Now();
  s.report.tables.clear();
  s.report.rows = 0;
  for (size_t t = 0; t < Tables().size(); ++t) {
    const TableSpec& table = Tables()[t];
    absl::StatusOr<int64_t> n =
        VerifyTable(*s.pg, s.source->conn(), table, s.columns[t]);
    if (!n.ok()) {
      return ReasonOf(n.status()) == "COPY_VERIFY_MISMATCH"
                 ? n.status()
                 : InTable(table.name, n.status());
    }
    s.report.tables.push_back({table.name, *n});
    s.report.rows += *n;
  }
  s.report.verify_time = absl::Now() - start;
  return absl::OkStatus();
}

absl::Status LoadColumns(Session& s) {
  for (const TableSpec& table : Tables()) {
    absl::StatusOr<std::vector<std::string>> columns =
        Columns(*s.pg, s.source->conn(), table);
    if (!columns.ok()) return columns.status();
    s.columns.push_back(std::move(*columns));
  }
  return absl::OkStatus();
}

absl::Status CopyInTransaction(Session& s, const CopyOptions& options) {
  std::vector<std::string> names;
  for (const TableSpec& t : Tables()) names.push_back(t.name);
  names.push_back("hub_meta");
  // EXCLUSIVE: readers may go on; a second copy or a hub's write waits
  // (at most lock_timeout, then STORE_BUSY) rather than interleave.
  if (absl::StatusOr<Result> r = s.pg->Exec(
          absl::StrCat("SET LOCAL lock_timeout = '30s'; LOCK TABLE ",
                       absl::StrJoin(names, ", "), " IN EXCLUSIVE MODE"));
      !r.ok()) {
    return r.status();
  }
  if (absl::Status st = CheckEmpty(*s.pg); !st.ok()) return st;
  const absl::Time start = absl::Now();
  for (size_t t = 0; t < Tables().size(); ++t) {
    const TableSpec& table = Tables()[t];
    const std::string sql = SqliteSelect(table, s.columns[t]);
    absl::StatusOr<Stmt> rows = s.source->conn().Prepare(sql.c_str());
    if (!rows.ok()) return InTable(table.name, rows.status());
    absl::StatusOr<int64_t> n =
        options.method == CopyMethod::kCopy
            ? CopyRows(*s.pg, *rows, table, s.columns[t])
            : InsertRows(*s.pg, *rows, table, s.columns[t], options.batch_rows);
    if (!n.ok()) return InTable(table.name, n.status());
  }
  if (absl::Status st = AdvanceIdentity(*s.pg, s.source->conn()); !st.ok()) {
    return InTable("message_inbox", st);
  }
  if (absl::Status st = RecordProvenance(*s.pg, options, s.report); !st.ok()) {
    return InTable("hub_meta", st);
  }
  s.report.copy_time = absl::Now() - start;
  if (options.before_verify) {
    if (absl::Status st = options.before_verify(*s.pg); !st.ok()) return st;
  }
  return VerifyAll(s);
}

}  // namespace

std::vector<std::string> CopiedTables() {
  std::vector<std::string> names;
  for (const TableSpec& t : Tables()) names.push_back(t.name);
  return names;
}

absl::StatusOr<CopyReport> CopySqliteToPostgres(const CopyOptions& options) {
  absl::StatusOr<Session> s = OpenBoth(options, /*migrate=*/true);
  if (!s.ok()) return s.status();
  if (absl::Status st = LoadColumns(*s); !st.ok()) return st;
  if (absl::StatusOr<Result> r = s->pg->Exec("BEGIN"); !r.ok()) {
    return r.status();
  }
  absl::Status st = CopyInTransaction(*s, options);
  if (st.ok()) st = s->pg->Exec("COMMIT").status();
  if (!st.ok()) {
    (void)s->pg->Exec("ROLLBACK");
    return st;
  }
  return std::move(s->report);
}

absl::StatusOr<CopyReport> VerifySqliteAgainstPostgres(
    const CopyOptions& options) {
  absl::StatusOr<Session> s = OpenBoth(options, /*migrate=*/false);
  if (!s.ok()) return s.status();
  if (absl::Status st = LoadColumns(*s); !st.ok()) return st;
  if (absl::StatusOr<Result> r =
          s->pg->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      !r.ok()) {
    return r.status();
  }
  absl::Status st = VerifyAll(*s);
  (void)s->pg->Exec("ROLLBACK");
  if (!st.ok()) return st;
  return std::move(s->report);
}

}  // namespace hub::storage::pg
