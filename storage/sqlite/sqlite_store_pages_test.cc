// Keyset pages of the listing queries: ListAgentsPage, ListRoles and
// ListClosedScopes with their paging fields, ListPendingPage,
// ListTraceMessages and ListDeadLetters. Each applies its filters in SQL,
// returns only rows after the key, at most `limit` of them, and runs on an
// index whose order is the listing's (checked with EXPLAIN QUERY PLAN on the
// very SQL the store prepares).
#include <sqlite3.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;

// The plan SQLite chooses for `sql`, one detail line per step.
std::string Plan(const std::string& path, const char* sql) {
  std::string out;
  for (const std::string& step : RawDb(path).QueryPlan(sql)) {
    absl::StrAppend(&out, step, "\n");
  }
  return out;
}

std::vector<std::string> AgentIds(const std::vector<AgentRecord>& rows) {
  std::vector<std::string> ids;
  for (const AgentRecord& a : rows) ids.push_back(a.agent_id);
  return ids;
}

AgentRegistration Agent(const std::string& id, const std::string& cli,
                        std::optional<std::string> project,
                        const std::string& topics_json = "[]") {
  AgentRegistration r;
  r.agent_id = id;
  r.cli = cli;
  r.now_ms = kNow;
  r.topics_json = topics_json;
  if (project) r.project_id = *project;
  return r;
}

using Ids = std::vector<std::string>;

class AgentPages : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = FreshDbPath();
    store_ = OpenOrDie(path_);
    for (const AgentRegistration& r :
         {Agent("a-01", "codex", "prj_1", R"(["build","x"])"),
          Agent("a-02", "claude", "prj_2", R"(["build"])"),
          Agent("a-03", "codex", std::nullopt, R"(["build"])"),
          Agent("a-04", "gemini", "prj_1", "not json"),
          Agent("a-05", "codex", "prj_1", R"({"t":"build"})"),
          Agent("a-06", "codex", "prj_3", R"([5,"builder","build"])"),
          Agent("a-07", "claude", "prj_1", R"(["buil"])")}) {
      ASSERT_TRUE(store_->agents().RegisterAgent(r).ok());
    }
  }
  std::vector<std::string> List(const AgentPageQuery& q) {
    absl::StatusOr<std::vector<AgentRecord>> rows =
        store_->agents().ListAgentsPage(q);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return rows.ok() ? AgentIds(*rows) : std::vector<std::string>{"<error>"};
  }

  std::string path_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(AgentPages, ReturnAtMostLimitRowsAfterTheKeyInAgentIdOrder) {
  AgentPageQuery q;
  q.limit = 3;
  EXPECT_EQ(List(q), (Ids{"a-01", "a-02", "a-03"}));
  q.after_agent_id = "a-03";
  EXPECT_EQ(List(q), (Ids{"a-04", "a-05", "a-06"}));
  q.after_agent_id = "a-06";
  EXPECT_EQ(List(q), (Ids{"a-07"}));
  q.after_agent_id = "a-07";
  EXPECT_EQ(List(q), Ids{});
  q.after_agent_id = "a-035";  // a key between rows works too
  EXPECT_EQ(List(q), (Ids{"a-04", "a-05", "a-06"}));
}

TEST_F(AgentPages, FilterByCliAndProjectInSql) {
  AgentPageQuery q;
  q.clis = {"codex", "gemini"};
  EXPECT_EQ(List(q), (Ids{"a-01", "a-03", "a-04", "a-05", "a-06"}));
  q.project_id = "prj_1";
  EXPECT_EQ(List(q), (Ids{"a-01", "a-04", "a-05"}));
  q.limit = 2;
  q.after_agent_id = "a-01";
  EXPECT_EQ(List(q), (Ids{"a-04", "a-05"}));
}

TEST_F(AgentPages, AProjectListAdmitsOnlyItsProjectsAndNeverAgentsWithout) {
  AgentPageQuery q;
  q.projects = std::vector<std::string>{"prj_2", "prj_3"};
  EXPECT_EQ(List(q), (Ids{"a-02", "a-06"}));
  q.projects = std::vector<std::string>{};
  EXPECT_EQ(List(q), Ids{});
  q.projects = std::vector<std::string>{"prj_\"1\\", ""};  // odd text binds
  EXPECT_EQ(List(q), Ids{});
  q.projects = std::nullopt;
  q.project_id = "prj_1";
  q.projects = std::vector<std::string>{"prj_2"};  // both apply: nothing
  EXPECT_EQ(List(q), Ids{});
}

TEST_F(AgentPages, ATopicMatchesWholeStringsOfAnArrayAndSkipsMalformedRows) {
  AgentPageQuery q;
  q.topic = "build";
  // a-04 (not JSON) and a-05 (an object) never match; a-06's 5 is skipped.
  EXPECT_EQ(List(q), (Ids{"a-01", "a-02", "a-03", "a-06"}));
  q.topic = "buil";
  EXPECT_EQ(List(q), (Ids{"a-07"}));
  q.topic = "x";
  q.clis = {"claude"};
  EXPECT_EQ(List(q), Ids{});
}

TEST_F(AgentPages, ThePrimaryKeyIndexDrivesRangeAndOrder) {
  const std::string plan = Plan(path_, rows::kAgentsPageSql);
  EXPECT_NE(plan.find("SEARCH agents USING INDEX sqlite_autoindex_agents_1 "
                      "(agent_id>?)"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("SCAN agents"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

TEST(PageCost, APageOfTenOutOfTwoThousandAgentsReadsElevenRows) {
  auto store = OpenOrDie(FreshDbPath());
  // Asynchronous writes, so that they share a few group commits.
  absl::BlockingCounter written(2000);
  for (int i = 0; i < 2000; ++i) {
    store->agents().RegisterAgentAsync(
        Agent(absl::StrFormat("agent-%04d", i), "codex", "prj_1"),
        [&written](absl::StatusOr<AgentRecord> row) {
          EXPECT_TRUE(row.ok()) << row.status();
          written.DecrementCount();
        });
  }
  written.Wait();
  AgentPageQuery q;
  q.after_agent_id = "agent-1000";
  q.limit = 11;
  const int64_t before = store->rows_read();
  absl::StatusOr<std::vector<AgentRecord>> rows =
      store->agents().ListAgentsPage(q);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->front().agent_id, "agent-1001");
  EXPECT_EQ(store->rows_read() - before, 11);
  const int64_t all_before = store->rows_read();
  ASSERT_EQ(store->agents().ListAgents()->size(), 2000u);
  EXPECT_EQ(store->rows_read() - all_before, 2000);  // the counter counts
}

// ---- roles and closed scopes ----------------------------------------------

RoleReservation Role(const std::string& wire, const std::string& project,
                     const std::string& scope) {
  RoleReservation r;
  r.role_key_wire = wire;
  r.project_id = project;
  r.role_kind = scope.empty() ? "cto" : "lead";
  r.scope_id = scope;
  r.now_ms = kNow;
  return r;
}

std::vector<std::string> Wires(const std::vector<RoleRecord>& rows) {
  std::vector<std::string> out;
  for (const RoleRecord& r : rows) out.push_back(r.role_key_wire);
  return out;
}

TEST(RolePages, KeysetProjectsStatesAndLimitAllApplyInSql) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->roles().ReserveRole(Role("w1", "prj_1", "")).ok());
  ASSERT_TRUE(store->roles().ReserveRole(Role("w2", "prj_2", "")).ok());
  ASSERT_TRUE(store->roles().ReserveRole(Role("w3", "prj_1", "scp_a")).ok());
  RoleReservation held = Role("w4", "prj_1", "scp_b");
  held.patch.holder_agent_id = "agent-h";  // elected-probing
  ASSERT_TRUE(store->roles().ReserveRole(held).ok());
  ASSERT_TRUE(store->roles().ReserveRole(Role("w5", "prj_3", "")).ok());

  RoleFilter f;
  f.limit = 2;
  EXPECT_EQ(Wires(*store->roles().ListRoles(f)), (Ids{"w1", "w2"}));
  f.after_wire = "w2";
  EXPECT_EQ(Wires(*store->roles().ListRoles(f)), (Ids{"w3", "w4"}));
  f.projects = std::vector<std::string>{"prj_1", "prj_3"};
  f.limit = 0;  // every row
  EXPECT_EQ(Wires(*store->roles().ListRoles(f)), (Ids{"w3", "w4", "w5"}));
  f.states = {RoleState::kElectedProbing};
  EXPECT_EQ(Wires(*store->roles().ListRoles(f)), (Ids{"w4"}));
  f.states = {RoleState::kElectable, RoleState::kActive};
  f.role_kind = "lead";
  EXPECT_EQ(Wires(*store->roles().ListRoles(f)), (Ids{"w3"}));
  f.projects = std::vector<std::string>{};
  EXPECT_TRUE(store->roles().ListRoles(f)->empty());

  const std::string plan = Plan(path, rows::kRolesPageSql);
  EXPECT_NE(plan.find("SEARCH role_registry USING INDEX "
                      "sqlite_autoindex_role_registry_1 (role_key_wire>?)"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

TEST(ClosedScopePages, KeysetProjectsAndLimitApplyInSql) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  for (const auto& [wire, project, scope] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"c1", "prj_1", "scp_1"},
           {"c2", "prj_2", "scp_2"},
           {"c3", "prj_1", "scp_3"},
           {"c4", "prj_1", "scp_4"}}) {
    ScopeClose c;
    c.project_id = project;
    c.scope_id = scope;
    c.role_key_wire = wire;
    c.closed_by = "ops";
    c.now_ms = kNow;
    ASSERT_TRUE(store->roles().CloseLeadScope(c).ok());
  }
  auto wires = [&](const ClosedScopeFilter& f) {
    absl::StatusOr<std::vector<ClosedScopeRecord>> rows =
        store->roles().ListClosedScopes(f);
    EXPECT_TRUE(rows.ok()) << rows.status();
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const ClosedScopeRecord& r : *rows) out.push_back(r.role_key_wire);
    return out;
  };
  ClosedScopeFilter f;
  f.limit = 2;
  EXPECT_EQ(wires(f), (Ids{"c1", "c2"}));
  f.after_wire = "c2";
  EXPECT_EQ(wires(f), (Ids{"c3", "c4"}));
  f.after_wire = "c1";
  f.projects = std::vector<std::string>{"prj_1"};
  EXPECT_EQ(wires(f), (Ids{"c3", "c4"}));
  f.project_id = "prj_2";
  EXPECT_EQ(wires(f), Ids{});

  const std::string plan = Plan(path, rows::kClosedScopesPageSql);
  EXPECT_NE(plan.find("(role_key_wire>?)"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

TEST(CandidatePages, KeysetByWireThenActivatorOrderWithProjectsAndAgent) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->roles().ReserveRole(Role("w1", "prj_1", "")).ok());
  ASSERT_TRUE(store->roles().ReserveRole(Role("w2", "prj_2", "")).ok());
  ASSERT_TRUE(store->roles().ReserveRole(Role("w3", "prj_1", "scp_a")).ok());
  auto upsert = [&](const std::string& wire, const std::string& agent,
                    int64_t priority, int64_t updated) {
    CandidateUpsert u;
    u.role_key_wire = wire;
    u.agent_id = agent;
    u.priority = priority;
    u.now_ms = updated;
    ASSERT_TRUE(store->roles().UpsertCandidate(u).ok());
  };
  upsert("w1", "ag-b", 5, kNow);
  upsert("w1", "ag-a", 5, kNow);
  upsert("w1", "ag-c", 5, kNow + 1);  // newer first among equals
  upsert("w1", "ag-d", 9, kNow);
  upsert("w2", "ag-a", 1, kNow);
  upsert("w3", "ag-a", 0, kNow);
  upsert("w3", "ag-e", 3, kNow);
  auto keys = [&](const CandidatePageQuery& q) {
    absl::StatusOr<std::vector<CandidateRecord>> rows =
        store->roles().ListCandidatesPage(q);
    EXPECT_TRUE(rows.ok()) << rows.status();
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const CandidateRecord& c : *rows)
      out.push_back(absl::StrCat(c.role_key_wire, "/", c.agent_id));
    return out;
  };
  CandidatePageQuery q;
  EXPECT_EQ(keys(q), (Ids{"w1/ag-d", "w1/ag-c", "w1/ag-a", "w1/ag-b", "w2/ag-a",
                          "w3/ag-e", "w3/ag-a"}));
  q.limit = 3;
  q.after = CandidatePageQuery::Key{"w1", 5, kNow + 1, "ag-c"};
  EXPECT_EQ(keys(q), (Ids{"w1/ag-a", "w1/ag-b", "w2/ag-a"}));
  q.after = CandidatePageQuery::Key{"w1", 5, kNow, "ag-b"};
  q.projects = std::vector<std::string>{"prj_1"};
  EXPECT_EQ(keys(q), (Ids{"w3/ag-e", "w3/ag-a"}));
  q.agent_id = "ag-a";
  q.after.reset();
  EXPECT_EQ(keys(q), (Ids{"w1/ag-a", "w3/ag-a"}));
  q.projects.reset();
  q.role_key_wire = "w2";
  EXPECT_EQ(keys(q), (Ids{"w2/ag-a"}));
  // One role, paged by its activator order; a key of another role puts
  // the page before or after all of it.
  q.agent_id.reset();
  q.role_key_wire = "w1";
  q.limit = 2;
  EXPECT_EQ(keys(q), (Ids{"w1/ag-d", "w1/ag-c"}));
  q.after = CandidatePageQuery::Key{"w1", 5, kNow + 1, "ag-c"};
  EXPECT_EQ(keys(q), (Ids{"w1/ag-a", "w1/ag-b"}));
  q.after = CandidatePageQuery::Key{"w0", 0, 0, "zz"};
  EXPECT_EQ(keys(q), (Ids{"w1/ag-d", "w1/ag-c"}));
  q.after = CandidatePageQuery::Key{"w2", 9, kNow, "ag-a"};
  EXPECT_EQ(keys(q), Ids{});
  q.projects = std::vector<std::string>{"prj_2"};  // w1 is prj_1's
  q.after.reset();
  EXPECT_EQ(keys(q), Ids{});

  const std::string plan = Plan(path, rows::kCandidatesPageSql);
  EXPECT_NE(plan.find("SEARCH c USING INDEX sqlite_autoindex_role_candidates_1 "
                      "(role_key_wire>?)"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("SCAN c"), std::string::npos) << plan;
  const std::string one = Plan(path, rows::kRoleCandidatesPageSql);
  EXPECT_NE(one.find("SEARCH c USING INDEX sqlite_autoindex_role_candidates_1 "
                     "(role_key_wire=?)"),
            std::string::npos)
      << one;
}

// ---- messages --------------------------------------------------------------

MessageRecord Msg(const std::string& id, int64_t priority, int64_t created,
                  const std::string& topic = "t.x",
                  const std::string& trace = "trace-1",
                  const std::string& from = "sender") {
  MessageRecord m;
  m.id = id;
  m.type = "event";
  m.from_agent = from;
  m.to_agent = "agent-a";
  m.topic = topic;
  m.priority = priority;
  m.ttl_ms = 300'000;
  m.created_at_ms = created;
  m.expires_at_ms = created + 300'000;
  m.correlation_id = "corr-" + id;
  m.trace_id = trace;
  return m;
}

std::vector<std::string> MessageIds(const std::vector<MessageRecord>& rows) {
  std::vector<std::string> out;
  for (const MessageRecord& m : rows) out.push_back(m.id);
  return out;
}

TEST(PendingPages, KeysetInPriorityThenAgeOrderWithTopicAndLimit) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m1", 5, kNow), {"agent-a"}).ok());
  ASSERT_TRUE(store->messages()
                  .InsertMessage(Msg("m2", 9, kNow + 5), {"agent-a"})
                  .ok());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m3", 5, kNow), {"agent-a"}).ok());
  ASSERT_TRUE(store->messages()
                  .InsertMessage(Msg("m4", 5, kNow - 1, "t.y"), {"agent-a"})
                  .ok());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m5", 1, kNow), {"agent-a"}).ok());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m6", 9, kNow), {"agent-b"}).ok());

  PendingPageQuery q;
  q.agent_id = "agent-a";
  q.now_ms = kNow + 10;
  EXPECT_EQ(MessageIds(*store->messages().ListPendingPage(q)),
            (Ids{"m2", "m4", "m1", "m3", "m5"}));
  q.limit = 2;
  q.after = PendingPageQuery::Key{5, kNow - 1, "m4"};
  EXPECT_EQ(MessageIds(*store->messages().ListPendingPage(q)),
            (Ids{"m1", "m3"}));
  q.after = PendingPageQuery::Key{5, kNow, "m1"};
  EXPECT_EQ(MessageIds(*store->messages().ListPendingPage(q)),
            (Ids{"m3", "m5"}));
  q.topic = "t.x";
  q.after.reset();
  q.limit = 0;
  EXPECT_EQ(MessageIds(*store->messages().ListPendingPage(q)),
            (Ids{"m2", "m1", "m3", "m5"}));
  q.now_ms = kNow + 300'002;  // m2 (created kNow + 5) alone is unexpired
  EXPECT_EQ(MessageIds(*store->messages().ListPendingPage(q)), (Ids{"m2"}));
}

TEST(TracePages, KeysetInCreationOrderAndOnlyTheTrace) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->messages().InsertMessage(Msg("m2", 5, kNow), {"a"}).ok());
  ASSERT_TRUE(store->messages().InsertMessage(Msg("m1", 5, kNow), {"a"}).ok());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m0", 5, kNow + 1), {"a"}).ok());
  ASSERT_TRUE(
      store->messages().InsertMessage(Msg("m3", 5, kNow - 1), {"a"}).ok());
  ASSERT_TRUE(store->messages()
                  .InsertMessage(Msg("n1", 5, kNow, "t.x", "trace-2"), {"a"})
                  .ok());
  TracePageQuery q;
  q.trace_id = "trace-1";
  EXPECT_EQ(MessageIds(*store->messages().ListTraceMessages(q)),
            (Ids{"m3", "m1", "m2", "m0"}));
  q.limit = 2;
  q.after = TracePageQuery::Key{kNow, "m1"};
  EXPECT_EQ(MessageIds(*store->messages().ListTraceMessages(q)),
            (Ids{"m2", "m0"}));
  q.after = TracePageQuery::Key{kNow + 1, "m0"};
  EXPECT_TRUE(store->messages().ListTraceMessages(q)->empty());

  const std::string plan = Plan(path, rows::kTracePageSql);
  EXPECT_NE(plan.find("USING INDEX idx_messages_trace"), std::string::npos)
      << plan;
}

TEST(DeadLetterPages, KeysetNewestFirstWithReasonSenderAndTheirMessages) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  struct Row {
    const char* id;
    int64_t failed;
    const char* reason;
    const char* from;
  };
  for (const Row& r : {Row{"d1", kNow + 1, "ttl_expired", "alice"},
                       Row{"d2", kNow + 3, "ttl_expired", "bob"},
                       Row{"d3", kNow + 3, "ROLE_SCOPE_CLOSED", "alice"},
                       Row{"d4", kNow + 2, "ttl_expired", "alice"}}) {
    ASSERT_TRUE(
        store->messages()
            .InsertMessage(Msg(r.id, 5, kNow, "t.x", "trace-1", r.from), {"a"})
            .ok());
    ASSERT_TRUE(store->messages()
                    .DeadLetterMessage(r.id, r.reason, r.failed, std::nullopt)
                    .ok());
  }
  {
    RawDb raw(path);  // a dead letter whose message row is gone
    ASSERT_EQ(raw.Exec(absl::StrCat("INSERT INTO dead_letters VALUES "
                                    "('d0', 'ttl_expired', ",
                                    kNow + 3, ", 'gone')")),
              "");
  }
  auto ids = [&](const DeadLetterPageQuery& q) {
    absl::StatusOr<std::vector<DeadLetterRow>> rows =
        store->messages().ListDeadLetters(q);
    EXPECT_TRUE(rows.ok()) << rows.status();
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const DeadLetterRow& r : *rows)
      out.push_back(r.dead_letter.message_id);
    return out;
  };
  DeadLetterPageQuery q;
  EXPECT_EQ(ids(q), (Ids{"d0", "d2", "d3", "d4", "d1"}));
  absl::StatusOr<std::vector<DeadLetterRow>> rows =
      store->messages().ListDeadLetters(q);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_FALSE((*rows)[0].message.has_value());
  EXPECT_EQ((*rows)[0].dead_letter.last_error, "gone");
  ASSERT_TRUE((*rows)[1].message.has_value());
  EXPECT_EQ((*rows)[1].message->from_agent, "bob");
  EXPECT_EQ((*rows)[1].message->status, MessageStatus::kDeadLetter);
  EXPECT_EQ((*rows)[1].dead_letter.failed_at_ms, kNow + 3);

  q.limit = 2;
  q.after = DeadLetterPageQuery::Key{kNow + 3, "d2"};
  EXPECT_EQ(ids(q), (Ids{"d3", "d4"}));
  q.reason = "ttl_expired";
  EXPECT_EQ(ids(q), (Ids{"d4", "d1"}));
  q.after.reset();
  q.from_agent = "alice";  // d0 has no message, so no sender
  EXPECT_EQ(ids(q), (Ids{"d4", "d1"}));

  const std::string plan = Plan(path, rows::kDeadLettersPageSql);
  EXPECT_NE(plan.find("USING INDEX idx_dead_letters_failed (failed_at_ms<?)"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

}  // namespace
}  // namespace hub::storage
