// Migration: triflux databases of schema v4..v8, built here from DDL in
// triflux's shape (TRIFLUX-HUB.md §1), open and migrate in place without
// losing a row; newer, foreign and corrupt files are refused untouched.
#include "storage/sqlite/migrations.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

// ---- triflux-shaped DDL, by version -----------------------------------------

std::string AgentsDdl(int v) {
  std::string cols =
      "agent_id TEXT PRIMARY KEY, cli TEXT NOT NULL CHECK (cli IN "
      "('codex','gemini','claude','other')), pid INTEGER, "
      "capabilities_json TEXT NOT NULL DEFAULT '[]', "
      "topics_json TEXT NOT NULL DEFAULT '[]', last_seen_ms INTEGER NOT NULL, "
      "lease_expires_ms INTEGER NOT NULL, status TEXT NOT NULL CHECK (status "
      "IN ('online','stale','offline')), metadata_json TEXT NOT NULL DEFAULT "
      "'{}'";
  if (v >= 6) {
    absl::StrAppend(&cols,
                    ", project_id TEXT, session_id TEXT, host_id TEXT, "
                    "transport_locators_json TEXT NOT NULL DEFAULT '[]'");
  }
  if (v >= 7) {
    absl::StrAppend(&cols, ", presence_generation INTEGER NOT NULL DEFAULT 0");
  }
  return absl::StrCat("CREATE TABLE agents (", cols,
                      ");"
                      "CREATE INDEX idx_agents_status ON agents(status);"
                      "CREATE INDEX idx_agents_lease ON "
                      "agents(lease_expires_ms);");
}

std::string MessagesDdl(int v) {
  std::string cols =
      "id TEXT PRIMARY KEY, type TEXT NOT NULL CHECK (type IN ('request',"
      "'response','event','handoff','human_request','human_response',"
      "'system')), from_agent TEXT NOT NULL, to_agent TEXT NOT NULL, "
      "topic TEXT NOT NULL, priority INTEGER NOT NULL CHECK (priority BETWEEN "
      "1 AND 9), ttl_ms INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, "
      "expires_at_ms INTEGER NOT NULL, correlation_id TEXT NOT NULL, "
      "trace_id TEXT NOT NULL, payload_json TEXT NOT NULL DEFAULT '{}', "
      "status TEXT NOT NULL CHECK (status IN ('queued','delivered','acked',"
      "'expired','dead_letter'))";
  if (v == 5) absl::StrAppend(&cols, ", role_scope TEXT");
  if (v >= 6) absl::StrAppend(&cols, ", role_key_wire TEXT");
  std::string ddl = absl::StrCat(
      "CREATE TABLE messages (", cols,
      ");"
      "CREATE INDEX idx_messages_status ON messages(status);"
      "CREATE INDEX idx_messages_to_agent ON messages(to_agent, status);"
      "CREATE INDEX idx_messages_expires ON messages(expires_at_ms);"
      "CREATE TABLE message_inbox (delivery_id INTEGER PRIMARY KEY "
      "AUTOINCREMENT, message_id TEXT NOT NULL REFERENCES messages(id) ON "
      "DELETE CASCADE, agent_id TEXT NOT NULL, delivered_at_ms INTEGER, "
      "acked_at_ms INTEGER, attempts INTEGER NOT NULL DEFAULT 0, "
      "UNIQUE(message_id, agent_id));"
      "CREATE TABLE dead_letters (message_id TEXT PRIMARY KEY, reason TEXT NOT "
      "NULL, failed_at_ms INTEGER NOT NULL, last_error TEXT);");
  if (v >= 6) {
    absl::StrAppend(&ddl,
                    "CREATE INDEX idx_messages_role_key ON "
                    "messages(role_key_wire, status, expires_at_ms);");
  }
  return ddl;
}

std::string OtherTablesDdl(int v) {
  return absl::StrCat(
      "CREATE TABLE human_requests (request_id TEXT PRIMARY KEY, "
      "requester_agent TEXT NOT NULL, kind TEXT NOT NULL, prompt TEXT NOT "
      "NULL, schema_json TEXT, state TEXT NOT NULL, deadline_ms INTEGER, "
      "default_action TEXT, correlation_id TEXT, trace_id TEXT, "
      "response_json TEXT);"
      "CREATE INDEX idx_human_requests_state ON human_requests(state);"
      "CREATE TABLE pipeline_state (key TEXT PRIMARY KEY, value TEXT);"
      "CREATE TABLE assign_jobs (job_id TEXT PRIMARY KEY, supervisor_agent "
      "TEXT, worker_agent TEXT, status TEXT, updated_at_ms INTEGER",
      v >= 6 ? ", dispatched_at_ms INTEGER" : "",
      ");"
      "CREATE TABLE reflexion_entries (id INTEGER PRIMARY KEY, body TEXT, "
      "type TEXT NOT NULL DEFAULT 'reflexion', adaptive_state_json TEXT NOT "
      "NULL DEFAULT '{}');");
}

std::string RolesDdl(int v) {
  if (v < 6) return "";
  return absl::StrCat(
      "CREATE TABLE role_registry (role_key_wire TEXT PRIMARY KEY, "
      "project_id TEXT NOT NULL, role_kind TEXT NOT NULL CHECK (role_kind IN "
      "('cto','lead')), scope_id TEXT NOT NULL DEFAULT '', state TEXT NOT "
      "NULL CHECK (state IN ('electable','elected-probing','active',"
      "'unreachable','quarantined')), holder_agent_id TEXT, "
      "previous_holder_agent_id TEXT, epoch INTEGER NOT NULL DEFAULT 0 CHECK "
      "(epoch >= 0), activation_seq INTEGER NOT NULL DEFAULT 0 CHECK "
      "(activation_seq >= 0), activation_id TEXT, activation_deadline_ms "
      "INTEGER, holder_lease_expires_ms INTEGER, charter_version TEXT, "
      "charter_acked_epoch INTEGER, retry_count INTEGER NOT NULL DEFAULT 0, "
      "next_probe_ms INTEGER, blocked_reason TEXT, last_transition_ms INTEGER "
      "NOT NULL, last_reason TEXT NOT NULL, version INTEGER NOT NULL DEFAULT "
      "0, CHECK ((role_kind = 'cto' AND scope_id = '') OR (role_kind = 'lead' "
      "AND scope_id <> ''))",
      v >= 8 ? ", CHECK (state <> 'active' OR holder_agent_id IS NOT NULL)"
             : "",
      ", UNIQUE (project_id, role_kind, scope_id));"
      "CREATE TABLE role_candidates (role_key_wire TEXT NOT NULL REFERENCES "
      "role_registry(role_key_wire) ON DELETE CASCADE, agent_id TEXT NOT "
      "NULL, source TEXT NOT NULL CHECK (source IN ('grant','standup',"
      "'operator')), priority INTEGER NOT NULL DEFAULT 0, "
      "transport_locators_json TEXT NOT NULL DEFAULT '[]', "
      "consecutive_probe_failures INTEGER NOT NULL DEFAULT 0, "
      "excluded_until_ms INTEGER, last_probe_ms INTEGER, last_probe_code "
      "TEXT, updated_at_ms INTEGER NOT NULL, PRIMARY KEY (role_key_wire, "
      "agent_id));");
}

// A triflux database at schema `v` with rows in every table.
void BuildTrifluxDb(const std::string& path, int v) {
  RawDb raw(path);
  ASSERT_EQ(raw.Exec(absl::StrCat(
                "CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT);",
                "INSERT INTO _meta VALUES ('schema_version', '", v, "');",
                AgentsDdl(v), MessagesDdl(v), OtherTablesDdl(v), RolesDdl(v))),
            "");
  ASSERT_EQ(
      raw.Exec(
          "INSERT INTO agents (agent_id, cli, pid, capabilities_json, "
          "topics_json, last_seen_ms, lease_expires_ms, status, "
          "metadata_json) VALUES "
          "('cto-1', 'claude', 42, '[\"role:cto:candidate\"]', "
          "'[\"cto\"]', 1000, 999999999999999, 'online', '{\"a\":1}'),"
          "('worker-1', 'codex', NULL, '[]', '[]', 2000, 3000, "
          "'offline', '{}');"
          "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
          "priority, ttl_ms, created_at_ms, expires_at_ms, "
          "correlation_id, trace_id, payload_json, status) VALUES "
          "('msg-1', 'event', 'cto-1', 'worker-1', 'build', 7, 1000, 10, "
          "1010, 'c1', 't1', '{\"x\":1}', 'queued'),"
          "('msg-2', 'handoff', 'worker-1', 'cto-1', 'done', 5, 1000, "
          "20, 1020, 'c2', 't2', '{}', 'dead_letter');"
          "INSERT INTO message_inbox (message_id, agent_id, attempts) "
          "VALUES ('msg-1', 'worker-1', 1);"
          "INSERT INTO dead_letters VALUES ('msg-2', 'ttl_expired', "
          "1020, NULL);"
          "INSERT INTO human_requests VALUES ('hr-1', 'cto-1', 'approval', "
          "'ok?', NULL, 'pending', 5000, 'decline', 'c', 't', NULL);"
          "INSERT INTO pipeline_state VALUES ('k', 'v');"
          "INSERT INTO assign_jobs (job_id, supervisor_agent, "
          "worker_agent, status, updated_at_ms) VALUES "
          "('job-1', 'cto-1', 'worker-1', 'queued', 5);"
          "INSERT INTO reflexion_entries (body) VALUES ('lesson');"),
      "");
  if (v == 5) {
    ASSERT_EQ(raw.Exec("UPDATE messages SET role_scope = 'cto' "
                       "WHERE id = 'msg-1'"),
              "");
  }
  if (v >= 6) {
    ASSERT_EQ(raw.Exec("UPDATE agents SET project_id = 'prj_X', "
                       "transport_locators_json = '[{\"kind\":\"tmux\"}]' "
                       "WHERE agent_id = 'cto-1';"
                       "INSERT INTO role_registry (role_key_wire, project_id, "
                       "role_kind, scope_id, state, holder_agent_id, epoch, "
                       "activation_seq, activation_id, last_transition_ms, "
                       "last_reason, version) VALUES "
                       "('rk2.cto', 'prj_X', 'cto', '', 'elected-probing', "
                       "'cto-1', 3, 3, 'act-3', 100, 'role_reserved', 4);"
                       "INSERT INTO role_candidates (role_key_wire, agent_id, "
                       "source, updated_at_ms) VALUES "
                       "('rk2.cto', 'cto-1', 'grant', 100);"),
              "");
  }
  if (v == 6 || v == 7) {  // no CHECK yet: a phantom active row is possible
    ASSERT_EQ(raw.Exec("INSERT INTO role_registry (role_key_wire, project_id, "
                       "role_kind, scope_id, state, holder_agent_id, epoch, "
                       "last_transition_ms, last_reason) VALUES "
                       "('rk2.lead', 'prj_X', 'lead', 'scp_1', 'active', "
                       "NULL, 2, 100, 'legacy')"),
              "");
  }
  if (v >= 7) {
    ASSERT_EQ(raw.Exec("UPDATE agents SET presence_generation = 3 "
                       "WHERE agent_id = 'cto-1'"),
              "");
  }
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class TrifluxMigration : public ::testing::TestWithParam<int> {};

TEST_P(TrifluxMigration, OpensInPlaceKeepingEveryRowAndConstraint) {
  const int v = GetParam();
  std::string path = FreshDbPath();
  BuildTrifluxDb(path, v);
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->migration().from_schema_version, std::to_string(v));
    EXPECT_TRUE(store->migration().migrated);

    // Agents: every row and field; generation 0 unless v7+ wrote one.
    auto agents = store->agents().ListAgents();
    ASSERT_TRUE(agents.ok());
    ASSERT_EQ(agents->size(), 2u);
    const AgentRecord& cto = (*agents)[0];
    EXPECT_EQ(cto.agent_id, "cto-1");
    EXPECT_EQ(cto.cli, "claude");
    EXPECT_EQ(cto.pid, 42);
    EXPECT_EQ(cto.capabilities_json, "[\"role:cto:candidate\"]");
    EXPECT_EQ(cto.topics_json, "[\"cto\"]");
    EXPECT_EQ(cto.metadata_json, "{\"a\":1}");
    EXPECT_EQ(cto.last_seen_ms, 1000);
    EXPECT_EQ(cto.presence_generation, v >= 7 ? 3 : 0);
    EXPECT_EQ(cto.project_id,
              v >= 6 ? std::optional<std::string>("prj_X") : std::nullopt);
    EXPECT_EQ(cto.transport_locators_json,
              v >= 6 ? "[{\"kind\":\"tmux\"}]" : "[]");
    const AgentRecord& worker = (*agents)[1];
    EXPECT_EQ(worker.status, AgentStatus::kOffline);
    EXPECT_FALSE(worker.pid.has_value());
    EXPECT_FALSE(worker.session_id.has_value());
    EXPECT_EQ(worker.presence_generation, 0);
    // hub's own column arrives empty: triflux never recorded a TTL.
    EXPECT_FALSE(cto.lease_ttl_ms.has_value());

    // Messages, inbox and dead letters.
    absl::StatusOr<MessageRecord> m1 = store->messages().GetMessage("msg-1");
    ASSERT_TRUE(m1.ok());
    EXPECT_EQ(m1->priority, 7);
    EXPECT_EQ(m1->payload_json, "{\"x\":1}");
    EXPECT_EQ(m1->status, MessageStatus::kQueued);
    EXPECT_FALSE(m1->role_key_wire.has_value());
    EXPECT_EQ(store->messages().GetMessage("msg-2")->status,
              MessageStatus::kDeadLetter);
    EXPECT_EQ(store->messages().ListInbox("msg-1")->at(0).attempts, 1);
    EXPECT_EQ(store->messages().GetDeadLetter("msg-2")->reason, "ttl_expired");

    // Roles: kept; the phantom active row repaired (v6, v7).
    if (v >= 6) {
      RoleRecord cto_role = *store->roles().GetRole("rk2.cto");
      EXPECT_EQ(cto_role.state, RoleState::kElectedProbing);
      EXPECT_EQ(cto_role.epoch, 3);
      EXPECT_EQ(cto_role.version, 4);
      EXPECT_EQ(cto_role.activation_id, "act-3");
      EXPECT_EQ(store->roles().ListCandidates("rk2.cto")->size(), 1u);
    }
    if (v == 6 || v == 7) {
      EXPECT_EQ(store->migration().phantom_roles_repaired, 1);
      RoleRecord lead = *store->roles().GetRole("rk2.lead");
      EXPECT_EQ(lead.state, RoleState::kElectable);
      EXPECT_EQ(lead.epoch, 3);
      EXPECT_EQ(lead.last_reason, "migration_phantom_active");
    }
    // The migrated database is fully usable.
    AgentRegistration r;
    r.agent_id = "worker-1";
    r.cli = "codex";
    r.now_ms = 10'000;
    EXPECT_EQ(store->agents().RegisterAgent(r)->presence_generation, 1);
  }

  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='schema_version'"),
            "8");
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='hub_schema_version'"),
            std::to_string(kHubSchemaVersion));
  // triflux's message indexes that no hub query reads are gone (and hub's
  // own of schema 5); the partial indexes of pending messages are there.
  EXPECT_EQ(raw.Query("SELECT group_concat(name) FROM sqlite_master WHERE "
                      "type = 'index' AND name IN ('idx_messages_status', "
                      "'idx_messages_to_agent', 'idx_messages_correlation', "
                      "'idx_messages_expires', 'idx_messages_priority', "
                      "'idx_inbox_message', 'idx_messages_role_key', "
                      "'idx_messages_pending_expiry')"),
            "<null>");
  EXPECT_EQ(raw.Query("SELECT group_concat(name) FROM (SELECT name FROM "
                      "sqlite_master WHERE name IN "
                      "('idx_messages_expiry_pending', "
                      "'idx_messages_role_pending') ORDER BY name)"),
            "idx_messages_expiry_pending,idx_messages_role_pending");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM human_requests"), "1");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM pipeline_state"), "1");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM reflexion_entries"), "1");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM pragma_table_info('assign_jobs') "
                      "WHERE name='dispatched_at_ms'"),
            "1");
  if (v == 5) {
    EXPECT_EQ(raw.Query("SELECT role_scope FROM messages WHERE id='msg-1'"),
              "cto");
  }
  // v8 integrity holds on the migrated table (CHECK or boot trigger).
  std::string err = raw.Exec(
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "scope_id, state, holder_agent_id, last_transition_ms, last_reason) "
      "VALUES ('rk2.phantom', 'prj_Y', 'cto', '', 'active', NULL, 1, 'x')");
  EXPECT_NE(err.find("CHECK constraint failed"), std::string::npos) << err;
  EXPECT_EQ(raw.Query("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw.Query("PRAGMA foreign_key_check"), "<none>");
  EXPECT_EQ(raw.Query("PRAGMA journal_mode"), "wal");
}

TEST_P(TrifluxMigration, SecondOpenChangesNothing) {
  std::string path = FreshDbPath();
  BuildTrifluxDb(path, GetParam());
  { auto store = OpenOrDie(path); }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->migration().migrated);
  EXPECT_EQ(store->migration().phantom_roles_repaired, 0);
}

INSTANTIATE_TEST_SUITE_P(SchemaVersions, TrifluxMigration,
                         ::testing::Values(4, 5, 6, 7, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("v", info.param);
                         });

TEST(Migration, FreshFileGetsTheCurrentSchemaAndBothVersions) {
  std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->migration().from_schema_version.has_value());
  EXPECT_EQ(store->Info().schema_version, "8");
  EXPECT_EQ(store->Info().hub_schema_version,
            std::to_string(kHubSchemaVersion));
  EXPECT_EQ(store->Info().store_type, "sqlite");
  EXPECT_EQ(store->Info().fingerprint.rfind("sqlite:", 0), 0u);
  EXPECT_EQ(store->Info().fingerprint.size(), 7u + 64u);
}

TEST(Migration, NewerTrifluxVersionIsRefusedNamingBothVersionsUntouched) {
  std::string path = FreshDbPath();
  BuildTrifluxDb(path, 8);
  {
    RawDb raw(path);
    raw.Exec("UPDATE _meta SET value = '9' WHERE key = 'schema_version'");
  }
  std::string before = FileBytes(path);
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(ReasonOf(store.status()), "SCHEMA_TOO_NEW");
  EXPECT_NE(store.status().message().find("9"), std::string::npos);
  EXPECT_NE(store.status().message().find("(8)"), std::string::npos);
  EXPECT_EQ(FileBytes(path), before);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='schema_version'"),
            "9");
}

// A lead scope close of prj_1 by "ops", as the hub records one.
ScopeClose CloseOf(const std::string& scope_id, const std::string& wire) {
  ScopeClose close;
  close.project_id = "prj_1";
  close.scope_id = scope_id;
  close.role_key_wire = wire;
  close.closed_by = "ops";
  close.now_ms = 9;
  return close;
}

// After a migration: the next open migrates nothing and the file says the
// current hub_schema_version.
void ExpectSettledAtTheCurrentHubVersion(const std::string& path) {
  {
    auto reopened = OpenOrDie(path);
    EXPECT_FALSE(reopened->migration().migrated);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='hub_schema_version'"),
            std::to_string(kHubSchemaVersion));
}

TEST(Migration, HubVersionOneGainsTheAgentOwnersAndClosedScopesTables) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  {
    RawDb raw(path);
    raw.Exec("DROP TABLE hub_agent_owners");
    raw.Exec("DROP TABLE hub_closed_scopes");
    raw.Exec("UPDATE _meta SET value = '1' WHERE key = 'hub_schema_version'");
  }
  auto store = OpenOrDie(path);
  EXPECT_TRUE(store->migration().migrated);
  EXPECT_EQ(store->migration().from_hub_schema_version, "1");
  EXPECT_EQ(*store->agents().ClaimAgentOwner("agent-1", "alice", 1), "alice");
  store.reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='hub_schema_version'"),
            std::to_string(kHubSchemaVersion));
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='schema_version'"),
            "8");
  EXPECT_EQ(raw.Query("SELECT principal FROM hub_agent_owners"), "alice");
  EXPECT_EQ(raw.Query("SELECT count(*) FROM hub_closed_scopes"), "0");
}

TEST(Migration, HubVersionTwoGainsTheClosedScopesTableAndKeepsItsData) {
  std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    ASSERT_EQ(*store->agents().ClaimAgentOwner("agent-1", "alice", 1), "alice");
    RoleReservation lead;
    lead.role_key_wire = "rk2.lead";
    lead.project_id = "prj_1";
    lead.role_kind = "lead";
    lead.scope_id = "scp_1";
    lead.now_ms = 5;
    ASSERT_TRUE(store->roles().ReserveRole(lead).ok());
  }
  {
    // A hub_schema_version 2 database: everything but the closed scopes.
    RawDb raw(path);
    raw.Exec("DROP TABLE hub_closed_scopes");
    raw.Exec("UPDATE _meta SET value = '2' WHERE key = 'hub_schema_version'");
  }
  auto store = OpenOrDie(path);
  EXPECT_TRUE(store->migration().migrated);
  EXPECT_EQ(store->migration().from_hub_schema_version, "2");
  EXPECT_EQ(store->roles().GetRole("rk2.lead")->scope_id, "scp_1");
  // The new table works: closing the scope removes the migrated role.
  absl::StatusOr<ScopeCloseResult> closed =
      store->roles().CloseLeadScope(CloseOf("scp_1", "rk2.lead"));
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(closed->removed_role.has_value());
  store.reset();
  ExpectSettledAtTheCurrentHubVersion(path);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT principal FROM hub_agent_owners"), "alice");
  EXPECT_EQ(raw.Query("SELECT closed_by FROM hub_closed_scopes"), "ops");
  EXPECT_EQ(raw.Query("PRAGMA integrity_check"), "ok");
}

TEST(Migration, HubVersionThreeClosedScopesGainTheirDeadLetteredCount) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  {
    // A hub_schema_version 3 database: hub_closed_scopes without the count,
    // holding a scope closed by that hub.
    RawDb raw(path);
    raw.Exec("DROP TABLE hub_closed_scopes");
    raw.Exec(
        "CREATE TABLE hub_closed_scopes (project_id TEXT NOT NULL, "
        "scope_id TEXT NOT NULL CHECK (scope_id <> ''), role_key_wire TEXT "
        "NOT NULL UNIQUE, closed_at_ms INTEGER NOT NULL, closed_by TEXT NOT "
        "NULL CHECK (closed_by <> ''), reason TEXT NOT NULL, PRIMARY KEY "
        "(project_id, scope_id))");
    raw.Exec(
        "INSERT INTO hub_closed_scopes VALUES ('prj_1', 'scp_old', "
        "'rk2.old', 7, 'ops', 'done')");
    raw.Exec("UPDATE _meta SET value = '3' WHERE key = 'hub_schema_version'");
  }
  auto store = OpenOrDie(path);
  EXPECT_TRUE(store->migration().migrated);
  EXPECT_EQ(store->migration().from_hub_schema_version, "3");
  // The old record is kept, its count unknown; a new close records one.
  std::optional<ClosedScopeRecord> old =
      *store->roles().GetClosedScope("rk2.old");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->reason, "done");
  EXPECT_FALSE(old->dead_lettered_count.has_value());
  ASSERT_TRUE(
      store->roles().CloseLeadScope(CloseOf("scp_new", "rk2.new")).ok());
  EXPECT_EQ((*store->roles().GetClosedScope("rk2.new"))->dead_lettered_count,
            0);
  store.reset();
  ExpectSettledAtTheCurrentHubVersion(path);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM hub_closed_scopes WHERE "
                      "dead_lettered_count IS NULL"),
            "1");
  EXPECT_EQ(raw.Query("PRAGMA integrity_check"), "ok");
}

TEST(Migration, AFileWithoutTheDeadLetterIndexGainsItOnOpen) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  {
    // A file written before the index existed (a triflux v8 file, or an
    // older hub's): same version, no idx_dead_letters_failed.
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("DROP INDEX idx_dead_letters_failed"), "");
  }
  auto store = OpenOrDie(path);
  EXPECT_TRUE(store->migration().migrated);
  EXPECT_EQ(store->Info().hub_schema_version,
            std::to_string(kHubSchemaVersion));
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT name FROM sqlite_master WHERE type = 'index' "
                      "AND name = 'idx_dead_letters_failed'"),
            "idx_dead_letters_failed");
}

TEST(Migration, NewerHubVersionIsRefused) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  {
    RawDb raw(path);
    raw.Exec(absl::StrCat("UPDATE _meta SET value = '", kHubSchemaVersion + 1,
                          "' WHERE key = 'hub_schema_version'"));
  }
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_EQ(ReasonOf(store.status()), "SCHEMA_TOO_NEW");
  EXPECT_NE(store.status().message().find(
                absl::StrCat("hub_schema_version ", kHubSchemaVersion + 1)),
            std::string::npos);
}

TEST(Migration, NonSqliteFileIsRefusedAndLeftByteForByte) {
  std::string path = FreshDbPath();
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is a text file, not a database\n";
  }
  std::string before = FileBytes(path);
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_EQ(ReasonOf(store.status()), "STORE_NOT_SQLITE");
  EXPECT_EQ(FileBytes(path), before);
}

TEST(Migration, CorruptDatabaseFailsQuickCheckAndIsLeftByteForByte) {
  std::string path = FreshDbPath();
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT);"
                       "INSERT INTO _meta VALUES ('schema_version', '8');"
                       "CREATE TABLE t (x TEXT);"
                       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 "
                       "FROM n WHERE i < 2000) "
                       "INSERT INTO t SELECT printf('%0100d', i) FROM n;"
                       "CREATE INDEX t_x ON t(x);"),
              "");
  }
  {
    // Scribble over the middle of the file (not page 1).
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(4096 * 20 + 7);
    std::string junk(4096 * 3, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  std::string before = FileBytes(path);
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(ReasonOf(store.status()), "STORE_CORRUPT") << store.status();
  EXPECT_EQ(FileBytes(path), before);
}

TEST(Migration, ForeignSqliteDatabaseWithoutMetaIsRefused) {
  std::string path = FreshDbPath();
  {
    RawDb raw(path);
    raw.Exec("CREATE TABLE photos (id INTEGER PRIMARY KEY)");
  }
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_EQ(ReasonOf(store.status()), "STORE_UNRECOGNIZED");
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM sqlite_master"), "1");
}

TEST(Migration, LegacyV8TablePhantomIsBlockedFromNowOnAndRepairedByRecovery) {
  // A v8 database whose role_registry predates the CHECK (created at v6/v7,
  // carried to v8 by triflux) may still hold a phantom active row.
  std::string path = FreshDbPath();
  BuildTrifluxDb(path, 7);
  {
    RawDb raw(path);
    raw.Exec("UPDATE _meta SET value = '8' WHERE key = 'schema_version'");
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->roles().GetRole("rk2.lead")->state,
            RoleState::kActive);  // until recovery
  {
    RawDb raw(path);
    std::string err = raw.Exec(
        "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
        "scope_id, state, holder_agent_id, last_transition_ms, last_reason) "
        "VALUES ('rk2.new', 'prj_Z', 'cto', '', 'active', NULL, 1, 'x')");
    EXPECT_NE(err.find("CHECK constraint failed"), std::string::npos) << err;
  }
  absl::StatusOr<RecoveryResult> rec = store->roles().RecoverRoles(10'000);
  ASSERT_TRUE(rec.ok()) << rec.status();
  RoleRecord lead = *store->roles().GetRole("rk2.lead");
  EXPECT_EQ(lead.state, RoleState::kElectable);
  EXPECT_EQ(lead.last_reason, "restart_phantom_active");
  EXPECT_EQ(lead.epoch, 3);
}

TEST(Migration, HalfAppliedSeamsAreCompletedOnTheNextOpen) {
  std::string path = FreshDbPath();
  BuildTrifluxDb(path, 6);
  {
    // A crash between triflux's seams and its version bump: v6 columns
    // present, version still "5".
    RawDb raw(path);
    raw.Exec("UPDATE _meta SET value = '5' WHERE key = 'schema_version'");
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->agents().GetAgent("cto-1")->presence_generation, 0);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT value FROM _meta WHERE key='schema_version'"),
            "8");
}

}  // namespace
}  // namespace hub::storage
