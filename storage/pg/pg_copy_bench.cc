// Copy speed of `hubctl db copy` (storage/pg/pg_copy.h): builds a hub SQLite
// database of --messages messages (each with one inbox row, and one agent
// per 100 messages), starts a throw-away PostgreSQL (pg_test_server.h,
// durable unless --fsync=false), and copies it into a fresh database with
// each method, --runs times; prints rows/s of the copy and of the
// verification (the median run). Not a test; the command and figures are in
// docs/BENCHMARKS.md, "`hubctl db copy`: SQLite into PostgreSQL".
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "storage/pg/pg_copy.h"
#include "storage/pg/pg_test_server.h"
#include "storage/sqlite/sqlite_store.h"

ABSL_FLAG(int, messages, 100000, "messages in the SQLite database");
ABSL_FLAG(int, runs, 3, "copies per method (the median is reported)");
ABSL_FLAG(std::string, methods, "copy,insert", "methods to measure");
ABSL_FLAG(int, batch_rows, 1000, "rows per INSERT (method insert)");
ABSL_FLAG(bool, fsync, true, "PostgreSQL with fsync on (durable commit)");
ABSL_FLAG(std::string, dir, "/var/tmp", "directory for the SQLite file");

namespace hub::storage::pg {
namespace {

bool Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::fprintf(stderr, "%s\n", error);
    sqlite3_free(error);
    return false;
  }
  return true;
}

// A hub database with `messages` messages of a realistic size.
bool BuildDatabase(const std::string& path, int messages) {
  std::remove(path.c_str());
  {
    SqliteStoreOptions options;
    options.path = path;
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return false;
    }
  }
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  bool ok = Exec(db, "BEGIN");
  const int agents = std::max(1, messages / 100);
  for (int a = 0; ok && a < agents; ++a) {
    ok = Exec(db, absl::StrFormat(
                      "INSERT INTO agents (agent_id, cli, pid, last_seen_ms, "
                      "lease_expires_ms, status, metadata_json, project_id) "
                      "VALUES ('session:agent-%d', 'claude', %d, 1700000000000,"
                      " 1700000030000, 'online', '{\"host\":\"h%d\"}', "
                      "'prj_AAAAAAAAAAAAAAAAAAAAAA')",
                      a, 1000 + a, a));
  }
  for (int m = 0; ok && m < messages; ++m) {
    const std::string id = absl::StrFormat("0190%04x-%04x-7000-8000-%012x",
                                           m >> 16, m & 0xffff, m);
    const int to = m % agents, from = (m + 1) % agents;
    ok = Exec(
        db,
        absl::StrFormat(
            "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
            "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
            "trace_id, payload_json, status) VALUES ('%s', 'request', "
            "'session:agent-%d', 'session:agent-%d', 'build', 5, 600000, "
            "%d, %d, 'corr-%d', 'trace-%d', '{\"task\":\"run the tests of "
            "package %d\",\"files\":[\"src/a.cc\",\"src/b.cc\"],\"note\":"
            "\"tab\\there\"}', '%s');"
            "INSERT INTO message_inbox (message_id, agent_id, "
            "delivered_at_ms, acked_at_ms, attempts) VALUES ('%s', "
            "'session:agent-%d', %d, %s, 1)",
            id, from, to, 1700000000 + m, 1700600000 + m, m, m, m,
            m % 3 == 0 ? "acked" : "delivered", id, to, 1700000001 + m,
            m % 3 == 0 ? absl::StrCat(1700000002 + m) : "NULL"));
  }
  ok = ok && Exec(db, "COMMIT");
  sqlite3_close(db);
  return ok;
}

int Main() {
  const std::string path =
      absl::StrCat(absl::GetFlag(FLAGS_dir), "/hub-copy-bench.db");
  const int messages = absl::GetFlag(FLAGS_messages);
  if (!BuildDatabase(path, messages)) return 1;
  testing::PgTestOptions pg_options;
  pg_options.durable = absl::GetFlag(FLAGS_fsync);
  absl::StatusOr<std::unique_ptr<testing::PgTestServer>> server =
      testing::PgTestServer::Create(pg_options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  int database = 0;
  for (absl::string_view method :
       absl::StrSplit(absl::GetFlag(FLAGS_methods), ',', absl::SkipEmpty())) {
    std::vector<double> copy_rates, verify_rates;
    int64_t rows = 0;
    for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
      const std::string name = absl::StrCat("bench_", ++database);
      if (absl::Status s = (*server)->CreateDatabase(name); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      CopyOptions options;
      options.sqlite_path = path;
      options.conninfo = (*server)->ConnInfo(name);
      options.method =
          method == "insert" ? CopyMethod::kInsert : CopyMethod::kCopy;
      options.batch_rows = absl::GetFlag(FLAGS_batch_rows);
      absl::StatusOr<CopyReport> report = CopySqliteToPostgres(options);
      if (!report.ok()) {
        std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
        return 1;
      }
      rows = report->rows;
      copy_rates.push_back(rows / absl::ToDoubleSeconds(report->copy_time));
      verify_rates.push_back(rows / absl::ToDoubleSeconds(report->verify_time));
    }
    std::sort(copy_rates.begin(), copy_rates.end());
    std::sort(verify_rates.begin(), verify_rates.end());
    std::printf(
        "method=%s rows=%lld (messages=%d) copy %.0f rows/s (min %.0f, max "
        "%.0f), verify %.0f rows/s, runs=%zu fsync=%s\n",
        std::string(method).c_str(), static_cast<long long>(rows), messages,
        copy_rates[copy_rates.size() / 2], copy_rates.front(),
        copy_rates.back(), verify_rates[verify_rates.size() / 2],
        copy_rates.size(), absl::GetFlag(FLAGS_fsync) ? "on" : "off");
  }
  std::remove(path.c_str());
  return 0;
}

}  // namespace
}  // namespace hub::storage::pg

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return hub::storage::pg::Main();
}
