// Creating and migrating hub's PostgreSQL schema against a real server the
// test starts itself: a fresh database gets every table at the current
// version, a second run changes nothing, hubs that migrate at once migrate
// once, a newer database is refused untouched, the tables keep the rules of
// SQLite's (a CHECK refused as STORE_CONSTRAINT), and an older database is
// brought up to date with its rows.
#include "storage/pg/pg_schema.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

class PgSchemaTest : public testing::PgDatabaseTest {
 protected:
  std::vector<std::string> Tables() {
    absl::StatusOr<Result> r = Connect()->Exec(
        "SELECT table_name FROM information_schema.tables WHERE "
        "table_schema = 'public' ORDER BY table_name");
    std::vector<std::string> names;
    if (!r.ok()) return names;
    for (int i = 0; i < r->rows(); ++i) names.emplace_back(r->Text(i, 0));
    return names;
  }
};

TEST_F(PgSchemaTest, AFreshDatabaseGetsEveryTableAtTheCurrentVersion) {
  std::unique_ptr<Connection> conn = Connect();
  absl::StatusOr<PgMigrationReport> report = MigratePostgres(*conn);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->from_version.has_value());
  EXPECT_TRUE(report->changed);
  EXPECT_EQ(Tables(),
            (std::vector<std::string>{"agents",
                                      "assign_jobs",
                                      "dead_letters",
                                      "hub_agent_owners",
                                      "hub_closed_scopes",
                                      "hub_commits",
                                      "hub_hubs",
                                      "hub_inbox_pending",
                                      "hub_inbox_settled",
                                      "hub_job_attempts",
                                      "hub_job_dependencies",
                                      "hub_job_late_results",
                                      "hub_meta",
                                      "hub_reservation_change_counter",
                                      "hub_reservation_changes",
                                      "hub_reservation_patterns",
                                      "hub_reservation_tokens",
                                      "hub_reservation_waiters",
                                      "hub_reservations",
                                      "hub_role_change_counter",
                                      "hub_role_changes",
                                      "message_inbox",
                                      "messages",
                                      "role_candidates",
                                      "role_registry"}));
  absl::StatusOr<Result> version =
      conn->Exec("SELECT value FROM hub_meta WHERE key = 'hub_schema_version'");
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(version->Text(0, 0), absl::StrCat(kPgSchemaVersion));

  absl::StatusOr<PgMigrationReport> again = MigratePostgres(*conn);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->from_version, kPgSchemaVersion);
  EXPECT_FALSE(again->changed);
}

// The log's trigger copies a role row as it is (NEW.*) after seq, kind and
// written_at_ms, and readers read it as a role_registry row.
TEST_F(PgSchemaTest, TheRoleChangeLogHoldsEveryRoleColumnInOrder) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  auto columns = [&conn](const char* table) {
    absl::StatusOr<Result> r = conn->Query(
        "SELECT column_name || ' ' || data_type FROM "
        "information_schema.columns WHERE table_schema = 'public' AND "
        "table_name = $1 ORDER BY ordinal_position",
        {std::string(table)});
    std::vector<std::string> names;
    if (!r.ok()) return names;
    for (int i = 0; i < r->rows(); ++i) names.emplace_back(r->Text(i, 0));
    return names;
  };
  std::vector<std::string> expected = {"seq bigint", "kind text",
                                       "written_at_ms bigint"};
  for (const std::string& c : columns("role_registry")) expected.push_back(c);
  EXPECT_EQ(columns("hub_role_changes"), expected);
}

TEST_F(PgSchemaTest, HubsThatMigrateAtOnceMigrateOnce) {
  constexpr int kHubs = 6;
  std::vector<absl::StatusOr<PgMigrationReport>> reports(kHubs);
  std::vector<std::thread> hubs;
  for (int i = 0; i < kHubs; ++i) {
    hubs.emplace_back([this, i, &reports] {
      std::unique_ptr<Connection> conn = Connect();
      reports[i] = conn ? MigratePostgres(*conn)
                        : absl::StatusOr<PgMigrationReport>(
                              absl::UnavailableError("no connection"));
    });
  }
  for (std::thread& t : hubs) t.join();
  int changed = 0;
  for (const auto& r : reports) {
    ASSERT_TRUE(r.ok()) << r.status();
    changed += r->changed ? 1 : 0;
  }
  EXPECT_EQ(changed, 1);
}

TEST_F(PgSchemaTest, ANewerDatabaseIsRefusedAndLeftAsItIs) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  ASSERT_TRUE(conn->Exec("UPDATE hub_meta SET value = '99' WHERE key = "
                         "'hub_schema_version'")
                  .ok());
  absl::StatusOr<PgMigrationReport> report = MigratePostgres(*conn);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(report.status()), "SCHEMA_TOO_NEW");
  absl::StatusOr<Result> version =
      conn->Exec("SELECT value FROM hub_meta WHERE key = 'hub_schema_version'");
  ASSERT_TRUE(version.ok()) << version.status();  // the connection is idle
  EXPECT_EQ(version->Text(0, 0), "99");

  ASSERT_TRUE(conn->Exec("UPDATE hub_meta SET value = 'v2' WHERE key = "
                         "'hub_schema_version'")
                  .ok());
  EXPECT_EQ(ReasonOf(MigratePostgres(*conn).status()), "STORE_UNRECOGNIZED");
}

TEST_F(PgSchemaTest, TheTablesKeepTheRulesOfSqlites) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  // An active role needs a holder; a cto has no scope.
  absl::StatusOr<Result> holderless = conn->Exec(
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "state, last_transition_ms, last_reason) VALUES ('rk2.x', 'prj_x', "
      "'cto', 'active', 0, 'test')");
  ASSERT_FALSE(holderless.ok());
  EXPECT_EQ(ReasonOf(holderless.status()), "STORE_CONSTRAINT");
  EXPECT_EQ(MetadataOf(holderless.status()).at("sqlstate"), "23514");
  absl::StatusOr<Result> scoped_cto = conn->Exec(
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "scope_id, state, last_transition_ms, last_reason) VALUES ('rk2.y', "
      "'prj_x', 'cto', 'scp_x', 'electable', 0, 'test')");
  EXPECT_EQ(ReasonOf(scoped_cto.status()), "STORE_CONSTRAINT");
  // A candidate of no role, and an inbox row of no message, are refused.
  absl::StatusOr<Result> orphan = conn->Exec(
      "INSERT INTO role_candidates (role_key_wire, agent_id, source, "
      "updated_at_ms) VALUES ('rk2.none', 'agent-1', 'operator', 0)");
  EXPECT_EQ(MetadataOf(orphan.status()).at("sqlstate"), "23503");
  absl::StatusOr<Result> inbox = conn->Exec(
      "INSERT INTO message_inbox (message_id, agent_id) VALUES ('m', 'a')");
  EXPECT_EQ(ReasonOf(inbox.status()), "STORE_CONSTRAINT");
  // A job's enumerated columns hold only their words (hub_state may be
  // NULL, as for a row triflux wrote).
  const std::string job =
      "INSERT INTO assign_jobs (job_id, supervisor_agent, worker_agent, "
      "created_at_ms, updated_at_ms, status, hub_state, worker_kind, "
      "on_dependency_failure, cancel_requested) VALUES ";
  ASSERT_TRUE(conn->Exec(job + "('j-1', 's', 'w', 1, 1, 'queued', NULL, "
                               "'pool', 'block', 1)")
                  .ok());
  for (const char* values :
       {"('j-2', 's', 'w', 1, 1, 'offered', 'offered', 'agent', 'cancel', 0)",
        "('j-3', 's', 'w', 1, 1, 'queued', 'paused', 'agent', 'cancel', 0)",
        "('j-4', 's', 'w', 1, 1, 'queued', 'queued', 'team', 'cancel', 0)",
        "('j-5', 's', 'w', 1, 1, 'queued', 'queued', 'agent', 'wait', 0)",
        "('j-6', 's', 'w', 1, 1, 'queued', 'queued', 'agent', 'cancel', 2)"}) {
    absl::StatusOr<Result> refused = conn->Exec(job + values);
    EXPECT_EQ(ReasonOf(refused.status()), "STORE_CONSTRAINT") << values;
  }
}

TEST_F(PgSchemaTest,
       AVersion9DatabaseTradesItsTableChecksForDomainsAndKeepsItsRows) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(MigratePostgres(*conn).ok());
  // Back to version 9's shape: the same rules as table CHECKs (named by
  // PostgreSQL, as version 9's column CHECKs were), plain column types, no
  // domains, and the status trigger over the plain column.
  for (const char* sql : {
           "DROP TRIGGER hub_inbox_pending_status ON messages",
           "ALTER TABLE messages ALTER COLUMN type TYPE TEXT COLLATE \"C\", "
           "ALTER COLUMN priority TYPE INTEGER, "
           "ALTER COLUMN status TYPE TEXT COLLATE \"C\", "
           "ADD CHECK (type IN ('request', 'response', 'event', 'handoff', "
           "'human_request', 'human_response', 'system')), "
           "ADD CHECK (priority BETWEEN 1 AND 9), "
           "ADD CHECK (status IN ('queued', 'delivered', 'acked', 'expired', "
           "'dead_letter'))",
           "ALTER TABLE agents ALTER COLUMN cli TYPE TEXT COLLATE \"C\", "
           "ALTER COLUMN status TYPE TEXT COLLATE \"C\", "
           "ADD CHECK (cli IN ('codex', 'gemini', 'claude', 'other')), "
           "ADD CHECK (status IN ('online', 'stale', 'offline'))",
           "DROP DOMAIN hub_agent_cli, hub_agent_status, hub_message_type, "
           "hub_message_priority, hub_message_status",
           "CREATE TRIGGER hub_inbox_pending_status AFTER UPDATE OF status "
           "ON messages FOR EACH ROW WHEN ((OLD.status IN ('queued', "
           "'delivered')) IS DISTINCT FROM (NEW.status IN ('queued', "
           "'delivered'))) EXECUTE FUNCTION hub_inbox_pending_message()",
           "INSERT INTO agents (agent_id, cli, last_seen_ms, lease_expires_ms, "
           "status) VALUES ('agent-1', 'claude', 1, 2, 'online')",
           "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
           "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
           "trace_id, status) VALUES ('m-1', 'event', 'a', 'agent-1', 't', "
           "5, 1000, 1, 1001, 'c', 'tr', 'queued')",
           "INSERT INTO message_inbox (message_id, agent_id) "
           "VALUES ('m-1', 'agent-1')",
           "UPDATE hub_meta SET value = '9' WHERE key = 'hub_schema_version'",
       }) {
    ASSERT_TRUE(conn->Exec(sql).ok()) << sql;
  }
  // A copy: the text lives in the result, which goes with the lambda.
  auto one = [&conn](const char* sql) -> std::string {
    absl::StatusOr<Result> r = conn->Exec(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status();
    if (!r.ok() || r->rows() != 1) return "?";
    return std::string(r->Text(0, 0));
  };
  EXPECT_EQ(one("SELECT count(*) FROM pg_constraint WHERE contype = 'c' AND "
                "conrelid IN ('messages'::regclass, 'agents'::regclass)"),
            "5");

  absl::StatusOr<PgMigrationReport> report = MigratePostgres(*conn);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->from_version, 9);
  EXPECT_TRUE(report->changed);
  EXPECT_EQ(one("SELECT value FROM hub_meta WHERE key = 'hub_schema_version'"),
            absl::StrCat(kPgSchemaVersion));
  // No table CHECK left on either table; the columns are the domains, each
  // with its check.
  EXPECT_EQ(one("SELECT count(*) FROM pg_constraint WHERE contype = 'c' AND "
                "conrelid IN ('messages'::regclass, 'agents'::regclass)"),
            "0");
  EXPECT_EQ(one("SELECT string_agg(column_name || ':' || domain_name, ',' "
                "ORDER BY table_name, column_name) FROM "
                "information_schema.columns WHERE table_schema = 'public' AND "
                "domain_name IS NOT NULL"),
            "cli:hub_agent_cli,status:hub_agent_status,"
            "cancel_requested:hub_job_flag,hub_state:hub_job_state,"
            "on_dependency_failure:hub_job_dependency_failure,"
            "status:hub_job_status,worker_kind:hub_job_worker_kind,"
            "priority:hub_message_priority,status:hub_message_status,"
            "type:hub_message_type");
  EXPECT_EQ(one("SELECT count(*) FROM pg_constraint WHERE contype = 'c' AND "
                "contypid <> 0 AND convalidated AND conname LIKE 'hub\\_%'"),
            "10");
  // The rows are there, the trigger is back, and the rules still hold.
  EXPECT_EQ(one("SELECT cli || ' ' || status FROM agents"), "claude online");
  EXPECT_EQ(one("SELECT type || ' ' || priority || ' ' || status FROM "
                "messages"),
            "event 5 queued");
  EXPECT_EQ(one("SELECT count(*) FROM pg_trigger WHERE tgname = "
                "'hub_inbox_pending_status'"),
            "1");
  for (const char* bad : {
           "UPDATE messages SET status = 'lost'",
           "UPDATE messages SET priority = 10",
           "UPDATE messages SET type = 'note'",
           "UPDATE agents SET cli = 'vim'",
           "UPDATE agents SET status = 'asleep'",
       }) {
    absl::StatusOr<Result> refused = conn->Exec(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(ReasonOf(refused.status()), "STORE_CONSTRAINT") << bad;
    EXPECT_EQ(MetadataOf(refused.status()).at("sqlstate"), "23514") << bad;
  }
  // The count trigger over the converted column still counts.
  ASSERT_TRUE(conn->Exec("UPDATE messages SET status = 'expired'").ok());
  EXPECT_EQ(one("SELECT COALESCE((SELECT settled FROM hub_inbox_settled WHERE "
                "agent_id = 'agent-1'), 0) - COALESCE((SELECT pending FROM "
                "hub_inbox_pending WHERE agent_id = 'agent-1'), 0)"),
            "0");
}

}  // namespace
}  // namespace hub::storage::pg
