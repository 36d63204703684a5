// Plans PostgresStore relies on, pinned against a real server the test
// starts itself: statements whose speed depends on the index the planner
// picks, checked with the statistics that misled it (a busy agent the last
// ANALYZE never saw), both as a generic plan and as a custom one.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_schema.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

class PgPlansTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    testing::PgDatabaseTest::SetUp();
    conn_ = Connect();
    ASSERT_NE(conn_, nullptr);
    ASSERT_TRUE(MigratePostgres(*conn_).ok());
  }

  void Sql(const std::string& sql) {
    absl::StatusOr<Result> r = conn_->Exec(sql);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }

  // `count` messages to `agent`, delivered, the first `acked` of them acked.
  void Inbox(const std::string& agent, int count, int acked) {
    Sql(absl::StrCat(
        "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
        "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
        "trace_id, payload_json, status) "
        "SELECT '",
        agent, "-' || g, 'event', 'sender', '", agent,
        "', 't', 5, 600000, g, 9000000000000, 'c' || g, 'tr', '{}', "
        "CASE WHEN g <= ",
        acked, " THEN 'acked' ELSE 'delivered' END FROM generate_series(1, ",
        count, ") g"));
    Sql(absl::StrCat(
        "INSERT INTO message_inbox (message_id, agent_id, delivered_at_ms, "
        "acked_at_ms, attempts) SELECT '",
        agent, "-' || g, '", agent, "', g, CASE WHEN g <= ", acked,
        " THEN g END, 1 FROM generate_series(1, ", count, ") g"));
  }

  // The plan of `sql` (prepared with `types`) executed with `args`, as JSON.
  std::string Plan(const std::string& mode, const std::string& sql,
                   const std::string& types, const std::string& args) {
    Sql("DEALLOCATE ALL");
    Sql(absl::StrCat("SET plan_cache_mode = ", mode));
    Sql(absl::StrCat("PREPARE s(", types, ") AS ", sql));
    absl::StatusOr<Result> r = conn_->Exec(
        absl::StrCat("EXPLAIN (FORMAT JSON) EXECUTE s(", args, ")"));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::string(r->Text(0, 0)) : std::string();
  }

  std::unique_ptr<Connection> conn_;
};

TEST_F(PgPlansTest, AnAckFindsItsRowsByMessageIdNotByWalkingTheAgentsInbox) {
  // The statistics know another agent only; then a new agent gets 3,000
  // messages, 2,000 of them still unacked.
  Inbox("seen", 200, 100);
  Sql("ANALYZE");
  Inbox("busy", 3000, 1000);
  for (const std::string mode : {"force_generic_plan", "force_custom_plan"}) {
    const std::string plan =
        Plan(mode, sql::kAckRowsSql, "text[], text, bigint",
             "'{busy-2999}', 'busy', 1");
    EXPECT_NE(plan.find("message_inbox_message_id_agent_id_key"),
              std::string::npos)
        << mode << "\n"
        << plan;
    EXPECT_EQ(plan.find("idx_inbox_agent"), std::string::npos) << mode << "\n"
                                                               << plan;
  }
}

TEST_F(PgPlansTest, TheAgentIndexHoldsOnlyUnackedRows) {
  Inbox("busy", 300, 200);
  absl::StatusOr<Result> r = conn_->Exec(
      "SELECT indexdef FROM pg_indexes WHERE tablename = 'message_inbox' "
      "AND indexname LIKE 'idx_inbox_agent%'");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows(), 1);
  EXPECT_NE(r->Text(0, 0).find("WHERE (acked_at_ms IS NULL)"),
            std::string::npos)
      << r->Text(0, 0);
  // The pending page reads it: an agent's pending messages are read without
  // touching its acked rows.
  const std::string plan =
      Plan("force_generic_plan",
           "SELECT i.message_id FROM message_inbox i WHERE i.agent_id = $1 "
           "AND i.acked_at_ms IS NULL",
           "text", "'busy'");
  EXPECT_NE(plan.find("idx_inbox_agent_unacked"), std::string::npos) << plan;
}

// Both statements a CAS may start with: the one-statement UPDATE, and the
// row read of a CAS that PlanCas decides first.
TEST_F(PgPlansTest, ACasTakesItsScopesLockEvenWhenTheRoleHasNoRow) {
  std::unique_ptr<Connection> other = Connect();
  ASSERT_NE(other, nullptr);
  const std::string key = "hashtextextended('hub.scope-wire:rk.none', 0)";
  RoleCas cas;
  cas.role_key_wire = "rk.none";
  cas.expected_version = 0;
  cas.expected_epoch = 0;
  cas.expected_activation_seq = std::optional<int64_t>(0);
  cas.expected_activation_id = std::optional<std::string>();
  cas.patch.state = "active";
  for (const std::string mode : {"force_generic_plan", "force_custom_plan"}) {
    for (bool update : {true, false}) {
      SCOPED_TRACE(update ? "LockScopeAndCasRole" : "LockScopeAndLoadRole");
      Sql(absl::StrCat("SET plan_cache_mode = ", mode));
      Sql("BEGIN");
      absl::StatusOr<std::optional<RoleRecord>> role =
          update ? LockScopeAndCasRole(*conn_, cas)
                 : LockScopeAndLoadRole(*conn_, "rk.none");
      ASSERT_TRUE(role.ok()) << mode << ": " << role.status();
      EXPECT_FALSE(role->has_value());
      // A close (the exclusive lock) has to wait for this transaction.
      absl::StatusOr<Result> tried =
          other->Exec(absl::StrCat("SELECT pg_try_advisory_lock(", key, ")"));
      ASSERT_TRUE(tried.ok()) << tried.status();
      EXPECT_EQ(tried->Text(0, 0), "f") << mode;
      Sql("COMMIT");
      tried = other->Exec(absl::StrCat("SELECT pg_try_advisory_lock(", key,
                                       "), "
                                       "pg_advisory_unlock(",
                                       key, ")"));
      ASSERT_TRUE(tried.ok()) << tried.status();
      EXPECT_EQ(tried->Text(0, 0), "t") << mode;
    }
  }
}

}  // namespace
}  // namespace hub::storage::pg
