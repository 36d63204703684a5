#include "storage/pg/copy_rows.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "status/status.h"

namespace hub::storage::pg {

namespace {

// A job row triflux wrote (hub_state NULL) is copied as hub adopts it when
// it migrates the file (AdoptTrifluxJobs, storage/sqlite/migrations.cc),
// whether or not the file was migrated for the copy: its state is the one
// its status names, its project its worker's (else its supervisor's), and a
// running one's attempt is bound to its worker at the worker's generation.
// So on PostgreSQL every job has a hub_state, as the partial indexes that
// claims and sweeps read need (storage/pg/schema.sql), and the copy is the
// job as hub would read it from the file. Verification reads SQLite through
// the same expressions.
#define HUB_COPY_ADOPTED(column, adopted) \
  "CASE WHEN hub_state IS NOT NULL THEN " column " ELSE " adopted " END"
constexpr std::pair<const char*, const char*> kAdoptedJobColumns[] = {
    {"hub_state",
     HUB_COPY_ADOPTED("hub_state",
                      "CASE WHEN status IN ('queued', 'running', "
                      "'succeeded', 'failed', 'timed_out') THEN status "
                      "ELSE 'failed' END")},
    {"project_id",
     HUB_COPY_ADOPTED("project_id",
                      "COALESCE(project_id, (SELECT a.project_id FROM agents "
                      "a WHERE a.agent_id = assign_jobs.worker_agent), "
                      "(SELECT a.project_id FROM agents a WHERE a.agent_id = "
                      "assign_jobs.supervisor_agent))")},
    {"attempt_worker",
     HUB_COPY_ADOPTED("attempt_worker",
                      "CASE WHEN status = 'running' THEN worker_agent END")},
    {"attempt_generation",
     HUB_COPY_ADOPTED("attempt_generation",
                      "CASE WHEN status = 'running' THEN (SELECT "
                      "a.presence_generation FROM agents a WHERE a.agent_id "
                      "= assign_jobs.worker_agent) END")},
};
#undef HUB_COPY_ADOPTED

}  // namespace

const std::vector<TableSpec>& Tables() {
  static const auto* tables = new std::vector<TableSpec>{
      {"agents", {"agent_id"}},
      {"messages", {"id"}},
      {"message_inbox", {"delivery_id"}, {"delivery_id"}, "delivery_id"},
      {"dead_letters", {"message_id"}},
      {"role_registry", {"role_key_wire"}},
      {"role_candidates", {"role_key_wire", "agent_id"}},
      {"hub_agent_owners", {"agent_id"}},
      {"hub_closed_scopes", {"project_id", "scope_id"}},
      {"hub_reservation_tokens", {"project_id"}},
      {"hub_reservations", {"reservation_id"}},
      {"hub_reservation_patterns", {"reservation_id", "pattern"}},
      {"assign_jobs",
       {"job_id"},
       {},
       nullptr,
       {std::begin(kAdoptedJobColumns), std::end(kAdoptedJobColumns)}},
      {"hub_job_dependencies", {"job_id", "parent_id"}},
      {"hub_job_late_results", {"job_id", "attempt"}, {"attempt"}},
      {"hub_job_attempts", {"job_id", "attempt"}, {"attempt"}},
  };
  return *tables;
}

namespace {

using Row = std::vector<std::optional<std::string>>;

std::string Quoted(absl::string_view identifier) {
  return absl::StrCat("\"", identifier, "\"");
}

bool IsIntegerKey(const TableSpec& table, absl::string_view column) {
  return std::find(table.integer_key.begin(), table.integer_key.end(),
                   column) != table.integer_key.end();
}

// PostgreSQL orders text keys byte by byte (COLLATE "C") as SQLite's
// BINARY collation does, whatever the database's collation.
std::string PgSelect(const TableSpec& table,
                     const std::vector<std::string>& columns) {
  std::vector<std::string> quoted, order;
  for (const std::string& c : columns) quoted.push_back(Quoted(c));
  for (const char* k : table.key) {
    order.push_back(IsIntegerKey(table, k) ? k
                                           : absl::StrCat(k, " COLLATE \"C\""));
  }
  return absl::StrCat("SELECT ", absl::StrJoin(quoted, ", "), " FROM ",
                      table.name, " ORDER BY ", absl::StrJoin(order, ", "));
}

Row SqliteRow(const Stmt& stmt, size_t columns) {
  Row row;
  row.reserve(columns);
  for (size_t i = 0; i < columns; ++i) {
    row.push_back(stmt.OptText(static_cast<int>(i)));
  }
  return row;
}

// COPY's text format: \N is NULL; backslash, tab, newline and carriage
// return are escaped.
void AppendCopyField(const std::optional<std::string>& value,
                     std::string* out) {
  if (!value.has_value()) {
    out->append("\\N");
    return;
  }
  for (char c : *value) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        out->push_back(c);
    }
  }
}

std::string KeyText(const TableSpec& table,
                    const std::vector<std::string>& columns, const Row& row) {
  std::vector<std::string> parts;
  for (const char* k : table.key) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i] == k) {
        parts.push_back(absl::StrCat(
            k, "=", row[i].has_value() ? ErrorText(*row[i], 100) : "NULL"));
      }
    }
  }
  return absl::StrJoin(parts, ",");
}

// <0, 0, >0 as `a`'s key sorts before, with or after `b`'s, in the order
// both engines returned them.
int CompareKeys(const TableSpec& table, const std::vector<std::string>& columns,
                const Row& a, const Row& b) {
  for (const char* k : table.key) {
    size_t i = 0;
    while (columns[i] != k) ++i;
    const std::string x = a[i].value_or(""), y = b[i].value_or("");
    if (IsIntegerKey(table, k)) {
      int64_t xi = 0, yi = 0;
      (void)absl::SimpleAtoi(x, &xi);
      (void)absl::SimpleAtoi(y, &yi);
      if (xi != yi) return xi < yi ? -1 : 1;
    } else if (int c = x.compare(y); c != 0) {
      return c;
    }
  }
  return 0;
}

absl::Status Mismatch(const TableSpec& table, const std::string& key,
                      const std::string& column, const std::string& what) {
  absl::Status s =
      ReasonError(absl::StatusCode::kDataLoss, "COPY_VERIFY_MISMATCH",
                  absl::StrCat("verification failed: table ", table.name,
                               " row ", key, ": ", what));
  s = WithMetadata(std::move(s), "table", table.name);
  s = WithMetadata(std::move(s), "key", key);
  return column.empty() ? s : WithMetadata(std::move(s), "column", column);
}

std::string Shown(const std::optional<std::string>& v) {
  return v.has_value() ? absl::StrCat("'", ErrorText(*v, 80), "'") : "NULL";
}

}  // namespace

std::string SqliteSelect(const TableSpec& table,
                         const std::vector<std::string>& columns) {
  std::vector<std::string> quoted;
  for (const std::string& c : columns) {
    std::string read = Quoted(c);
    for (const auto& [column, expression] : table.sqlite_reads) {
      if (c == column) read = absl::StrCat("(", expression, ") AS ", read);
    }
    quoted.push_back(std::move(read));
  }
  return absl::StrCat("SELECT ", absl::StrJoin(quoted, ", "), " FROM ",
                      table.name, " ORDER BY ", absl::StrJoin(table.key, ", "));
}

absl::StatusOr<int64_t> CopyRows(Connection& pg, Stmt& rows,
                                 const TableSpec& table,
                                 const std::vector<std::string>& columns) {
  std::vector<std::string> quoted;
  for (const std::string& c : columns) quoted.push_back(Quoted(c));
  if (absl::Status s = pg.StartCopyIn(absl::StrCat("COPY ", table.name, " (",
                                                   absl::StrJoin(quoted, ", "),
                                                   ") FROM STDIN"));
      !s.ok()) {
    return s;
  }
  std::string buffer;
  int64_t n = 0;
  while (true) {
    absl::StatusOr<bool> more = rows.Step();
    if (!more.ok()) {
      (void)pg.EndCopyIn("the SQLite read failed");
      return more.status();
    }
    if (*more) {
      for (size_t i = 0; i < columns.size(); ++i) {
        if (i > 0) buffer.push_back('\t');
        AppendCopyField(rows.OptText(static_cast<int>(i)), &buffer);
      }
      buffer.push_back('\n');
      ++n;
    }
    if (buffer.size() >= (1 << 20) || (!*more && !buffer.empty())) {
      if (absl::Status s = pg.PutCopyData(buffer); !s.ok()) return s;
      buffer.clear();
    }
    if (!*more) break;
  }
  absl::StatusOr<Result> done = pg.EndCopyIn();
  if (!done.ok()) return done.status();
  return n;
}

// Multi-row INSERTs of up to `batch_rows` rows, kBatchesPerPipeline of them
// per round trip. An INSERT takes at most 65535 parameters.
absl::StatusOr<int64_t> InsertRows(Connection& pg, Stmt& rows,
                                   const TableSpec& table,
                                   const std::vector<std::string>& columns,
                                   int batch_rows) {
  constexpr size_t kBatchesPerPipeline = 8;
  const size_t width = columns.size();
  const size_t per_insert =
      std::max<size_t>(1, std::min<size_t>(batch_rows, 65535 / width));
  std::vector<std::string> quoted;
  for (const std::string& c : columns) quoted.push_back(Quoted(c));
  auto prepared = [&](size_t count) -> absl::StatusOr<std::string> {
    const std::string name = absl::StrCat("hub_copy_", table.name, "_", count);
    if (pg.Prepared(name)) return name;
    std::string sql = absl::StrCat(
        "INSERT INTO ", table.name, " (", absl::StrJoin(quoted, ", "), ") ",
        table.identity != nullptr ? "OVERRIDING SYSTEM VALUE " : "", "VALUES ");
    for (size_t r = 0, p = 1; r < count; ++r) {
      absl::StrAppend(&sql, r > 0 ? ", (" : "(");
      for (size_t c = 0; c < width; ++c, ++p) {
        absl::StrAppend(&sql, c > 0 ? ", $" : "$", p);
      }
      absl::StrAppend(&sql, ")");
    }
    if (absl::Status s = pg.Prepare(name, sql); !s.ok()) return s;
    return name;
  };
  std::vector<Pipelined> pipeline;
  std::vector<Param> params;
  size_t in_batch = 0;
  int64_t n = 0;
  auto end_batch = [&]() -> absl::Status {
    absl::StatusOr<std::string> name = prepared(in_batch);
    if (!name.ok()) return name.status();
    pipeline.push_back({*name, std::move(params)});
    params.clear();
    in_batch = 0;
    return absl::OkStatus();
  };
  auto send = [&]() -> absl::Status {
    for (absl::StatusOr<Result>& answer : pg.Pipeline(pipeline)) {
      if (!answer.ok()) return answer.status();
    }
    pipeline.clear();
    return absl::OkStatus();
  };
  while (true) {
    absl::StatusOr<bool> more = rows.Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    for (size_t i = 0; i < width; ++i) {
      params.push_back(rows.OptText(static_cast<int>(i)));
    }
    ++n;
    if (++in_batch == per_insert) {
      if (absl::Status s = end_batch(); !s.ok()) return s;
      if (pipeline.size() == kBatchesPerPipeline) {
        if (absl::Status s = send(); !s.ok()) return s;
      }
    }
  }
  if (in_batch > 0) {
    if (absl::Status s = end_batch(); !s.ok()) return s;
  }
  if (!pipeline.empty()) {
    if (absl::Status s = send(); !s.ok()) return s;
  }
  return n;
}

// Walks both engines' rows of `table` in key order, side by side.
absl::StatusOr<int64_t> VerifyTable(Connection& pg, storage::Connection& sqlite,
                                    const TableSpec& table,
                                    const std::vector<std::string>& columns) {
  const std::string sql = SqliteSelect(table, columns);
  absl::StatusOr<Stmt> rows = sqlite.Prepare(sql.c_str());
  if (!rows.ok()) return rows.status();
  const std::string cursor = absl::StrCat("hub_verify_", table.name);
  if (absl::StatusOr<Result> r =
          pg.Exec(absl::StrCat("DECLARE ", cursor, " NO SCROLL CURSOR FOR ",
                               PgSelect(table, columns)));
      !r.ok()) {
    return r.status();
  }
  const std::string fetch = absl::StrCat("FETCH FORWARD 10000 FROM ", cursor);
  absl::StatusOr<Result> batch = pg.Exec(fetch);
  int at = 0;
  int64_t n = 0;
  absl::StatusOr<bool> has_sqlite = rows->Step();
  while (true) {
    if (!batch.ok()) return batch.status();
    if (at == batch->rows() && batch->rows() > 0) {
      batch = pg.Exec(fetch);
      at = 0;
      continue;
    }
    if (!has_sqlite.ok()) return has_sqlite.status();
    const bool has_pg = at < batch->rows();
    if (!*has_sqlite && !has_pg) break;
    Row pg_row;
    if (has_pg) {
      for (size_t c = 0; c < columns.size(); ++c) {
        const int ci = static_cast<int>(c);
        pg_row.push_back(batch->IsNull(at, ci)
                             ? std::nullopt
                             : std::optional<std::string>(batch->Text(at, ci)));
      }
    }
    const Row sqlite_row =
        *has_sqlite ? SqliteRow(*rows, columns.size()) : Row();
    const int order = !*has_sqlite ? 1
                      : !has_pg
                          ? -1
                          : CompareKeys(table, columns, sqlite_row, pg_row);
    if (order < 0) {
      return Mismatch(table, KeyText(table, columns, sqlite_row), "",
                      "in SQLite but missing from PostgreSQL");
    }
    if (order > 0) {
      return Mismatch(table, KeyText(table, columns, pg_row), "",
                      "in PostgreSQL but not in SQLite");
    }
    for (size_t c = 0; c < columns.size(); ++c) {
      if (sqlite_row[c] != pg_row[c]) {
        return Mismatch(table, KeyText(table, columns, sqlite_row), columns[c],
                        absl::StrCat("column ", columns[c], " is ",
                                     Shown(sqlite_row[c]), " in SQLite but ",
                                     Shown(pg_row[c]), " in PostgreSQL"));
      }
    }
    ++n;
    ++at;
    has_sqlite = rows->Step();
  }
  if (absl::StatusOr<Result> r = pg.Exec(absl::StrCat("CLOSE ", cursor));
      !r.ok()) {
    return r.status();
  }
  return n;
}

}  // namespace hub::storage::pg
