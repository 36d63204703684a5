// Copying a SQLite database into a real PostgreSQL server the test starts
// itself: every table arrives row for row by either method (awkward text
// included), the identity continues after the copied ids, a triflux-shaped
// file is migrated on a private snapshot and left untouched, a target with
// hub data is refused, a row PostgreSQL refuses or a verification that
// reads back a different row leaves the target empty, and every refusal
// carries its reason.
#include "storage/pg/pg_copy.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_schema.h"
#include "storage/pg/pg_test_database.h"
#include "storage/sqlite/database_lock.h"
#include "storage/test_util.h"

namespace hub::storage::pg {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::RawDb;

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Jobs hub wrote (a queued pool job, a running one bound to its attempt's
// worker, one that succeeded), a job triflux wrote after hub migrated the
// file (hub_state NULL: running, no project), their dependencies, and late
// results whose attempts order as numbers (2 before 10), not as text.
constexpr char kHubJobs[] =
    "INSERT INTO assign_jobs (job_id, project_id, supervisor_agent, "
    "supervisor_role_wire, worker_kind, worker_agent, worker_role_wire, "
    "pool_filter_json, topic, task, payload_json, priority, timeout_ms, "
    "ttl_ms, max_retries, retry_policy_json, on_dependency_failure, "
    "idempotency_key, trace_id, correlation_id, hub_state, status, attempt, "
    "retry_count, attempt_worker, attempt_generation, attempt_role_epoch, "
    "not_before_ms, deadline_ms, cancel_requested, progress_json, "
    "result_json, error_json, created_at_ms, updated_at_ms, started_at_ms, "
    "dispatched_at_ms, completed_at_ms, last_retry_at_ms) VALUES "
    "('job-1', 'prj_X', 'a-1', NULL, 'pool', '', NULL, "
    "'{\"capabilities\":[\"x\"],\"topic\":\"t\tb\"}', 'assign.job', "
    "'build\nit', '{\"x\":\"\\\\N\"}', 9, 60000, 60000, 2, "
    "'{\"initial_backoff_ms\":1000}', 'block', 'key-1', 'tr', 'co', "
    "'queued', 'queued', 1, 0, NULL, NULL, NULL, 9223372036854775807, NULL, "
    "0, NULL, NULL, NULL, 100, 100, NULL, NULL, NULL, NULL),"
    "('job-2', 'prj_X', '', 'rk2.cto', 'role', 'a-2', 'rk2.cto', NULL, "
    "'assign.job', 't', '{}', 5, 600000, 600000, 0, NULL, 'cancel', NULL, "
    "'', '', 'waiting_human', 'running', 3, 2, 'a-2', 0, 3, NULL, 5000, 1, "
    "'{\"pct\":50}', NULL, '{\"reason\":\"worker_gone\"}', 110, 120, "
    "115, 111, NULL, 119),"
    "('job-3', 'prj_X', 'a-1', NULL, 'agent', 'a-2', NULL, NULL, 'assign.job', "
    "'', '{}', 5, 600000, 600000, 0, NULL, 'cancel', NULL, NULL, NULL, "
    "'succeeded', 'succeeded', 1, 0, 'a-2', 0, NULL, NULL, NULL, 0, NULL, "
    "'{\"ok\":true}', NULL, 90, 95, 91, 90, 95, NULL);"
    "INSERT INTO assign_jobs (job_id, supervisor_agent, worker_agent, status, "
    "attempt, deadline_ms, last_message_id, created_at_ms, updated_at_ms) "
    "VALUES ('job-t', 'a-2', 'a-1', 'running', 1, 7000, 'm-1', 80, 85);"
    "INSERT INTO hub_job_dependencies VALUES ('job-1', 'job-3'), "
    "('job-1', 'job-2');"
    "INSERT INTO hub_job_late_results VALUES "
    "('job-2', 10, 'a-1', NULL, '{\"reason\":\"x\"}', 118),"
    "('job-2', 2, 'a-2', '{\"late\":1}', NULL, 117);";

// A hub database at the current schema with rows in every table, values
// that COPY's text format must escape, NULLs and 64-bit integers.
void BuildHubDb(const std::string& path) {
  { ASSERT_NE(storage::testing::OpenOrDie(path), nullptr); }
  RawDb raw(path);
  ASSERT_EQ(
      raw.Exec(
          "INSERT INTO agents (agent_id, cli, pid, capabilities_json, "
          "topics_json, last_seen_ms, lease_expires_ms, status, "
          "metadata_json, project_id, session_id, host_id, "
          "transport_locators_json, presence_generation, lease_ttl_ms) VALUES "
          "('a-1', 'claude', 42, '[\"x\"]', '[]', 1000, 9223372036854775807, "
          "'online', '{\"tab\":\"a\tb\",\"nl\":\"a\nb\\\\n\",\"cr\":\"\r\"}', "
          "'prj_X', NULL, 'hst_1', '[]', 3, 30000),"
          "('a-2', 'codex', NULL, '[]', '[]', 2, 3, 'offline', '{}', NULL, "
          "'s', NULL, '[]', 0, NULL),"
          "('\xC3\xA9t\xC3\xA9', 'gemini', -1, '[]', '[]', 2, 3, 'stale', "
          "'{\"\xE2\x9C\x93\":\"\\\\\"}', NULL, NULL, NULL, '[]', 0, NULL);"
          "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
          "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
          "trace_id, payload_json, status, role_key_wire) VALUES "
          "('m-1', 'event', 'a-1', 'a-2', 't', 7, 1000, 10, 1010, 'c', 't', "
          "'{\"x\":\"\\\\N\"}', 'queued', NULL),"
          "('m-2', 'handoff', 'a-2', 'a-1', 'd', 5, 1000, 20, 1020, 'c', 't', "
          "'', 'dead_letter', 'rk2.lead');"
          "INSERT INTO message_inbox (delivery_id, message_id, agent_id, "
          "delivered_at_ms, acked_at_ms, attempts) VALUES "
          "(1, 'm-1', 'a-2', 11, NULL, 1), (5, 'm-2', 'a-1', 21, 22, 2),"
          "(9, 'm-1', 'a-1', NULL, NULL, 0);"
          "DELETE FROM message_inbox WHERE delivery_id = 9;"
          "INSERT INTO dead_letters VALUES ('m-2', 'ttl_expired', 1020, NULL);"
          "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
          "scope_id, state, holder_agent_id, epoch, activation_seq, "
          "activation_id, last_transition_ms, last_reason, version) VALUES "
          "('rk2.cto', 'prj_X', 'cto', '', 'active', 'a-1', 3, 3, 'act-3', "
          "100, 'role_activated', 4),"
          "('rk2.lead', 'prj_X', 'lead', 'scp_1', 'electable', NULL, 0, 0, "
          "NULL, 100, 'created', 0);"
          "INSERT INTO role_candidates (role_key_wire, agent_id, source, "
          "priority, updated_at_ms) VALUES ('rk2.cto', 'a-1', 'grant', 5, 1),"
          "('rk2.cto', 'a-2', 'standup', 0, 2),"
          "('rk2.lead', 'a-2', 'operator', 1, 3);"
          "INSERT INTO hub_agent_owners VALUES ('a-1', 'alice', 7);"
          "INSERT INTO hub_closed_scopes VALUES ('prj_X', 'scp_0', "
          "'rk2.closed', 50, 'alice', 'done', 2),"
          "('prj_X', 'scp_9', 'rk2.old', 40, 'bob', '', NULL);"
          "INSERT INTO hub_reservation_tokens VALUES ('prj_X', 4, 1);"
          "INSERT INTO hub_reservations VALUES ('res-1', 'prj_X', 'a-1', 1, "
          "1, 4, 'editing', 100, 60100);"
          "INSERT INTO hub_reservation_patterns VALUES ('res-1', 0, 'prj_X', "
          "'src/*.cc', 'src', 1), ('res-1', 1, 'prj_X', 'docs', 'docs', 1);"),
      "");
  ASSERT_EQ(raw.Exec(kHubJobs), "");
}

class PgCopyTest : public testing::PgDatabaseTest {
 protected:
  CopyOptions Options(const std::string& sqlite_path) {
    CopyOptions options;
    options.sqlite_path = sqlite_path;
    options.conninfo = server_->ConnInfo(database_);
    options.temp_dir = std::getenv("TEST_TMPDIR");
    options.now_ms = [] { return int64_t{1'700'000'000'000}; };
    return options;
  }
  // The number of rows in each copied table, and in hub_meta.
  std::string Counts() {
    std::unique_ptr<Connection> conn = Connect();
    std::string out;
    for (const std::string& t : CopiedTables()) {
      absl::StatusOr<Result> r =
          conn->Exec(absl::StrCat("SELECT count(*) FROM ", t));
      absl::StrAppend(&out, t, "=", r.ok() ? r->Text(0, 0) : "?", " ");
    }
    return out;
  }
  std::string PgValue(const std::string& sql) {
    absl::StatusOr<Result> r = Connect()->Exec(sql);
    if (!r.ok()) return std::string(r.status().message());
    return r->rows() == 0 ? "<none>" : std::string(r->Text(0, 0));
  }
};

class PgCopyMethodTest : public PgCopyTest,
                         public ::testing::WithParamInterface<CopyMethod> {};

TEST_P(PgCopyMethodTest, CopiesEveryTableRowForRowAndContinuesTheIdentity) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  const std::string before = FileBytes(path);
  CopyOptions options = Options(path);
  options.method = GetParam();
  options.batch_rows = 2;  // several INSERTs per table, a partial last one
  absl::StatusOr<CopyReport> report = CopySqliteToPostgres(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->migrated_snapshot);
  EXPECT_EQ(report->from_hub_schema_version, "13");
  EXPECT_EQ(report->rows,
            3 + 2 + 2 + 1 + 2 + 3 + 1 + 2 + 1 + 1 + 2 + 4 + 2 + 2);
  std::string counts;
  for (const TableRows& t : report->tables) {
    absl::StrAppend(&counts, t.table, "=", t.rows, " ");
  }
  EXPECT_EQ(counts,
            "agents=3 messages=2 message_inbox=2 dead_letters=1 "
            "role_registry=2 role_candidates=3 hub_agent_owners=1 "
            "hub_closed_scopes=2 hub_reservation_tokens=1 hub_reservations=1 "
            "hub_reservation_patterns=2 assign_jobs=4 hub_job_dependencies=2 "
            "hub_job_late_results=2 hub_job_attempts=0 ");
  EXPECT_EQ(Counts(), counts);
  EXPECT_TRUE(report->left_behind.empty());
  EXPECT_EQ(FileBytes(path), before);

  EXPECT_EQ(PgValue("SELECT metadata_json FROM agents WHERE agent_id='a-1'"),
            "{\"tab\":\"a\tb\",\"nl\":\"a\nb\\\\n\",\"cr\":\"\r\"}");
  EXPECT_EQ(PgValue("SELECT lease_expires_ms FROM agents WHERE "
                    "agent_id='a-1'"),
            "9223372036854775807");
  EXPECT_EQ(PgValue("SELECT pid IS NULL FROM agents WHERE agent_id='a-2'"),
            "t");
  EXPECT_EQ(PgValue("SELECT payload_json FROM messages WHERE id='m-2'"), "");
  EXPECT_EQ(PgValue("SELECT pool_filter_json || task || payload_json || "
                    "not_before_ms FROM assign_jobs WHERE job_id='job-1'"),
            "{\"capabilities\":[\"x\"],\"topic\":\"t\tb\"}build\nit"
            "{\"x\":\"\\\\N\"}9223372036854775807");
  EXPECT_EQ(PgValue("SELECT string_agg(attempt || ':' || agent_id, ',' "
                    "ORDER BY attempt) FROM hub_job_late_results"),
            "2:a-2,10:a-1");
  // The job triflux wrote arrives as hub adopts it: in the state its status
  // names, in its worker's project, its attempt bound to that worker at the
  // worker's generation. The file keeps it as triflux wrote it.
  EXPECT_EQ(PgValue("SELECT concat_ws(' ', hub_state, status, project_id, "
                    "attempt_worker, attempt_generation, last_message_id) "
                    "FROM assign_jobs WHERE job_id='job-t'"),
            "running running prj_X a-1 3 m-1");
  EXPECT_EQ(RawDb(path).Query("SELECT coalesce(hub_state, project_id, "
                              "attempt_worker, 'none') FROM assign_jobs "
                              "WHERE job_id='job-t'"),
            "none");
  // Delivery ids continue after the highest one SQLite handed out (9, since
  // deleted), not after the highest left (5).
  EXPECT_EQ(PgValue("INSERT INTO message_inbox (message_id, agent_id) "
                    "VALUES ('m-2', 'a-2') RETURNING delivery_id"),
            "10");
  EXPECT_EQ(PgValue("SELECT value FROM hub_meta WHERE "
                    "key='copied_from_sqlite'"),
            path);

  // The copy verifies again on its own, and a later change is found.
  absl::StatusOr<CopyReport> verified = VerifySqliteAgainstPostgres(options);
  EXPECT_EQ(ReasonOf(verified.status()), "COPY_VERIFY_MISMATCH");
  EXPECT_EQ(MetadataOf(verified.status())["table"], "message_inbox");
  EXPECT_NE(verified.status().message().find(
                "delivery_id=10: in PostgreSQL but not in SQLite"),
            std::string::npos)
      << verified.status();
  ASSERT_EQ(PgValue("DELETE FROM message_inbox WHERE delivery_id = 10"),
            "<none>");
  verified = VerifySqliteAgainstPostgres(options);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->rows, report->rows);
}

INSTANTIATE_TEST_SUITE_P(Methods, PgCopyMethodTest,
                         ::testing::Values(CopyMethod::kCopy,
                                           CopyMethod::kInsert),
                         [](const ::testing::TestParamInfo<CopyMethod>& p) {
                           return p.param == CopyMethod::kCopy ? "Copy"
                                                               : "Insert";
                         });

// hub_meta, hub_hubs (the membership of hubs sharing the database) and
// hub_commits (the writers' commit ids) are PostgreSQL's own;
// hub_inbox_pending, hub_inbox_settled and the role change log
// (hub_role_changes, hub_role_change_counter) are derived (their triggers fill
// them as the inbox and role rows are copied); the reservation change log
// (hub_reservation_changes, hub_reservation_change_counter) is history that
// hubs read from its head, and waiters (hub_reservation_waiters) belong to
// calls in progress.
TEST_F(PgCopyTest, EveryTableOfTheSchemaIsCopiedButPostgresOwnAndTheDerived) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  absl::StatusOr<Result> r = conn->Exec(
      "SELECT table_name FROM information_schema.tables WHERE "
      "table_schema = 'public' AND table_name NOT IN ('hub_meta', "
      "'hub_hubs', 'hub_commits', 'hub_inbox_pending', 'hub_inbox_settled', "
      "'hub_role_changes', 'hub_role_change_counter', "
      "'hub_reservation_changes', 'hub_reservation_change_counter', "
      "'hub_reservation_waiters') ORDER BY 1");
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> tables;
  for (int i = 0; i < r->rows(); ++i) tables.emplace_back(r->Text(i, 0));
  std::vector<std::string> copied = CopiedTables();
  std::sort(copied.begin(), copied.end());
  EXPECT_EQ(copied, tables);
}

TEST_F(PgCopyTest, AnOlderFileIsMigratedOnASnapshotAndLeftUntouched) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  {
    // A file as triflux v8 left it after a hub opened it once (no hub
    // version, no hub tables), with one of triflux's own tables.
    // tests/e2e/hubctl_db_copy_test.py copies a file of triflux's DDL.
    RawDb raw(path);
    ASSERT_EQ(
        raw.Exec(
            "DELETE FROM _meta WHERE key = 'hub_schema_version';"
            "DROP TABLE hub_agent_owners; DROP TABLE "
            "hub_closed_scopes; DROP TABLE hub_reservation_patterns; "
            "DROP TABLE hub_reservations; DROP TABLE "
            "hub_reservation_tokens; CREATE TABLE pipeline_state (key TEXT "
            "PRIMARY KEY, value TEXT); INSERT INTO pipeline_state "
            "VALUES ('k', 'v'), ('k2', 'v2');"
            "DROP TABLE hub_job_dependencies; DROP TABLE "
            "hub_job_late_results; DROP TABLE assign_jobs;"
            // triflux's assign_jobs (TRIFLUX-HUB.md §8), none of hub's
            // columns: a running job and a queued one.
            "CREATE TABLE assign_jobs (job_id TEXT PRIMARY KEY, "
            "supervisor_agent TEXT NOT NULL, worker_agent TEXT NOT NULL, "
            "topic TEXT NOT NULL DEFAULT 'assign.job', task TEXT NOT NULL "
            "DEFAULT '', payload_json TEXT NOT NULL DEFAULT '{}', status TEXT "
            "NOT NULL CHECK (status IN ('queued','running','succeeded',"
            "'failed','timed_out')), attempt INTEGER NOT NULL DEFAULT 1, "
            "retry_count INTEGER NOT NULL DEFAULT 0, max_retries INTEGER NOT "
            "NULL DEFAULT 0, priority INTEGER NOT NULL DEFAULT 5, ttl_ms "
            "INTEGER NOT NULL DEFAULT 600000, timeout_ms INTEGER NOT NULL "
            "DEFAULT 600000, deadline_ms INTEGER, trace_id TEXT, "
            "correlation_id TEXT, last_message_id TEXT, result_json TEXT, "
            "error_json TEXT, created_at_ms INTEGER NOT NULL, updated_at_ms "
            "INTEGER NOT NULL, started_at_ms INTEGER, dispatched_at_ms "
            "INTEGER, completed_at_ms INTEGER, last_retry_at_ms INTEGER);"
            "INSERT INTO assign_jobs (job_id, supervisor_agent, worker_agent, "
            "status, deadline_ms, created_at_ms, updated_at_ms) VALUES "
            "('job-t', 'a-2', 'a-1', 'running', 7000, 80, 85), "
            "('job-q', 'a-1', 'a-2', 'queued', NULL, 81, 81);"),
        "");
  }
  const std::string before = FileBytes(path);
  absl::StatusOr<CopyReport> report = CopySqliteToPostgres(Options(path));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->migrated_snapshot);
  EXPECT_EQ(report->from_schema_version, "8");
  EXPECT_EQ(report->from_hub_schema_version, "");
  EXPECT_EQ(report->rows, 3 + 2 + 2 + 1 + 2 + 3 + 2);
  ASSERT_EQ(report->left_behind.size(), 1u);
  EXPECT_EQ(report->left_behind[0].table, "pipeline_state");
  EXPECT_EQ(report->left_behind[0].rows, 2);
  EXPECT_EQ(PgValue("SELECT count(*) FROM hub_closed_scopes"), "0");
  // triflux's jobs, as hub adopted them on the snapshot: the queued one in
  // its supervisor's project (its worker has none), the running one bound
  // to its worker.
  EXPECT_EQ(PgValue("SELECT string_agg(concat_ws(' ', job_id, hub_state, "
                    "project_id, attempt_worker, attempt_generation, "
                    "worker_kind, cancel_requested), ', ' ORDER BY job_id) "
                    "FROM assign_jobs"),
            "job-q queued prj_X agent 0, job-t running prj_X a-1 3 agent 0");
  EXPECT_EQ(FileBytes(path), before);
  // No snapshot stays behind.
  for (const auto& entry :
       std::filesystem::directory_iterator(std::getenv("TEST_TMPDIR"))) {
    EXPECT_EQ(entry.path().filename().string().rfind("hub-copy.", 0),
              std::string::npos)
        << entry.path();
  }
}

// A file of an older hub (hub_schema_version 11) has no job tables: its
// snapshot gets them empty, and the copy carries no job.
TEST_F(PgCopyTest, AFileFromBeforeJobsCopiesNoJob) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  ASSERT_EQ(RawDb(path).Exec("DROP TABLE assign_jobs; DROP TABLE "
                             "hub_job_dependencies; DROP TABLE "
                             "hub_job_late_results; UPDATE _meta SET value = "
                             "'11' WHERE key = 'hub_schema_version'"),
            "");
  absl::StatusOr<CopyReport> report = CopySqliteToPostgres(Options(path));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->migrated_snapshot);
  EXPECT_EQ(report->from_hub_schema_version, "11");
  std::string jobs;
  for (const TableRows& t : report->tables) {
    if (t.table.find("job") != std::string::npos) {
      absl::StrAppend(&jobs, t.table, "=", t.rows, " ");
    }
  }
  EXPECT_EQ(jobs,
            "assign_jobs=0 hub_job_dependencies=0 hub_job_late_results=0 "
            "hub_job_attempts=0 ");
  EXPECT_TRUE(VerifySqliteAgainstPostgres(Options(path)).ok());
}

// Every column of a copied table in a file at hub's current schema has its
// PostgreSQL column (the copy carries PostgreSQL's columns, so one missing
// there would be left behind without a word), but for where an agent's
// presence is held, which only hubs sharing a database have.
TEST_F(PgCopyTest, PostgresHasEveryColumnOfEveryCopiedSqliteTable) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  RawDb raw(path);
  for (const std::string& table : CopiedTables()) {
    absl::StatusOr<Result> pg = conn->Query(
        "SELECT string_agg(column_name::text, ',' ORDER BY column_name "
        "COLLATE \"C\") FROM information_schema.columns WHERE table_schema "
        "= current_schema() AND table_name = $1 AND column_name NOT LIKE "
        "'stream\\_hub\\_%'",
        {table});
    ASSERT_TRUE(pg.ok()) << pg.status();
    EXPECT_EQ(raw.Query(absl::StrCat("SELECT group_concat(name, ',') FROM "
                                     "(SELECT name FROM pragma_table_info('",
                                     table, "') ORDER BY name)")),
              pg->Text(0, 0))
        << table;
  }
}

TEST_F(PgCopyTest, ATargetWithHubDataIsRefusedUntouched) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  ASSERT_TRUE(CopySqliteToPostgres(Options(path)).ok());
  const std::string counts = Counts();
  absl::StatusOr<CopyReport> again = CopySqliteToPostgres(Options(path));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(again.status()), "TARGET_NOT_EMPTY");
  EXPECT_EQ(MetadataOf(again.status())["table"], "agents");
  EXPECT_EQ(Counts(), counts);

  // Emptied tables still carry the record of the earlier copy.
  ASSERT_EQ(PgValue("TRUNCATE agents, messages, message_inbox, dead_letters, "
                    "role_registry, role_candidates, hub_agent_owners, "
                    "hub_reservation_patterns, hub_reservations, "
                    "hub_reservation_tokens, "
                    "hub_closed_scopes, assign_jobs, hub_job_dependencies, "
                    "hub_job_late_results"),
            "<none>");
  again = CopySqliteToPostgres(Options(path));
  EXPECT_EQ(ReasonOf(again.status()), "TARGET_NOT_EMPTY");
  EXPECT_EQ(MetadataOf(again.status())["table"], "hub_meta");
}

TEST_F(PgCopyTest, AVerificationThatReadsADifferentRowLeavesTheTargetEmpty) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  CopyOptions options = Options(path);
  options.before_verify = [](Connection& pg) {
    return pg
        .Exec("UPDATE role_candidates SET priority = 6 WHERE agent_id = 'a-1'")
        .status();
  };
  absl::StatusOr<CopyReport> report = CopySqliteToPostgres(options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReasonOf(report.status()), "COPY_VERIFY_MISMATCH");
  std::map<std::string, std::string> meta = MetadataOf(report.status());
  EXPECT_EQ(meta["table"], "role_candidates");
  EXPECT_EQ(meta["key"], "role_key_wire=rk2.cto,agent_id=a-1");
  EXPECT_EQ(meta["column"], "priority");
  EXPECT_NE(
      report.status().message().find("is '5' in SQLite but '6' in PostgreSQL"),
      std::string::npos)
      << report.status();
  EXPECT_EQ(Counts(),
            "agents=0 messages=0 message_inbox=0 dead_letters=0 "
            "role_registry=0 role_candidates=0 hub_agent_owners=0 "
            "hub_closed_scopes=0 hub_reservation_tokens=0 hub_reservations=0 "
            "hub_reservation_patterns=0 assign_jobs=0 hub_job_dependencies=0 "
            "hub_job_late_results=0 hub_job_attempts=0 ");
  EXPECT_EQ(PgValue("SELECT count(*) FROM hub_meta WHERE key LIKE 'copied%'"),
            "0");
  // The failed copy left nothing that refuses the next one.
  options.before_verify = nullptr;
  EXPECT_TRUE(CopySqliteToPostgres(options).ok());
}

TEST_F(PgCopyTest, ARowPostgresRefusesFailsTheCopyNamingItsTable) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  {
    // SQLite enforces foreign keys only when asked: an orphan delivery.
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("INSERT INTO message_inbox (message_id, agent_id) "
                       "VALUES ('gone', 'a-1')"),
              "");
  }
  absl::StatusOr<CopyReport> report = CopySqliteToPostgres(Options(path));
  EXPECT_EQ(ReasonOf(report.status()), "STORE_CONSTRAINT") << report.status();
  EXPECT_EQ(MetadataOf(report.status())["table"], "message_inbox");
  EXPECT_EQ(MetadataOf(report.status())["sqlstate"], "23503");
  EXPECT_EQ(PgValue("SELECT count(*) FROM agents"), "0");
}

TEST_F(PgCopyTest, EveryRefusalCarriesItsReason) {
  const std::string path = FreshDbPath();
  BuildHubDb(path);
  CopyOptions options = Options(path);

  options.conninfo = "postgres://[::1";
  EXPECT_EQ(ReasonOf(CopySqliteToPostgres(options).status()),
            "STORE_URL_INVALID");
  options.conninfo = "host=/nonexistent-dir port=5432 dbname=x";
  absl::Status unreachable = CopySqliteToPostgres(options).status();
  EXPECT_EQ(unreachable.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(unreachable), "STORE_UNAVAILABLE");
  options.conninfo = server_->ConnInfo(database_);

  options.sqlite_path = path + ".missing";
  EXPECT_EQ(CopySqliteToPostgres(options).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReasonOf(CopySqliteToPostgres(options).status()),
            "STORE_NOT_FOUND");
  const std::string junk = FreshDbPath("-junk");
  std::ofstream(junk) << "not a database at all, just some text";
  options.sqlite_path = junk;
  EXPECT_EQ(ReasonOf(CopySqliteToPostgres(options).status()),
            "STORE_NOT_SQLITE");
  const std::string newer = FreshDbPath("-newer");
  BuildHubDb(newer);
  RawDb(newer).Exec(
      "UPDATE _meta SET value = '99' WHERE key = 'hub_schema_version'");
  options.sqlite_path = newer;
  EXPECT_EQ(ReasonOf(CopySqliteToPostgres(options).status()), "SCHEMA_TOO_NEW");

  options.sqlite_path = path;
  {
    absl::StatusOr<std::unique_ptr<DatabaseLock>> held =
        DatabaseLock::Acquire(path, DatabaseHolder{"hubd", "", "x:1", ""});
    ASSERT_TRUE(held.ok());
    absl::Status locked = CopySqliteToPostgres(options).status();
    EXPECT_EQ(ReasonOf(locked), "DATABASE_LOCKED");
    EXPECT_NE(locked.message().find("hubctl backup"), std::string::npos);
  }
  EXPECT_TRUE(CopySqliteToPostgres(options).ok());
}

}  // namespace
}  // namespace hub::storage::pg
