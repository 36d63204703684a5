// Messages on SQLite only: the query plans of the sweep and the role
// backlogs. The behaviour of messages on both engines is
// store_messages_test.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;
using testing::TestMessage;

constexpr int64_t kNow = 1'700'000'000'000;

TEST(ExpirySweep, ReadsARangeOfItsIndexNotEveryPendingMessage) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    // Many pending messages, few expired: the sweep's plan must not depend
    // on an empty table.
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(store->messages()
                      .InsertMessage(TestMessage(absl::StrCat("m", i), 5, kNow,
                                                 i < 5 ? 10 : 100'000),
                                     {"a"})
                      .ok());
    }
  }
  RawDb db(path);
  // As hub runs it (no statistics), and after ANALYZE.
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    if (analyzed == 1) {
      ASSERT_EQ(db.Exec("ANALYZE"), "");
    }
    const std::vector<std::string> plan =
        db.QueryPlan(rows::kExpiredMessagesSql);
    ASSERT_FALSE(plan.empty());
    EXPECT_NE(plan[0].find(
                  "USING INDEX idx_messages_expiry_pending (expires_at_ms<?)"),
              std::string::npos)
        << "analyzed=" << analyzed << ": " << plan[0];
  }
}

TEST(RoleBacklog, ReadsThePartialIndexOfPendingRoleMessages) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    // Mostly agent messages and acked role messages, which the partial index
    // leaves out, and a few pending ones for two roles.
    for (int i = 0; i < 300; ++i) {
      MessageRecord m = TestMessage(absl::StrCat("m", i));
      if (i % 3 == 0) m.role_key_wire = i % 2 == 0 ? "role-a" : "role-b";
      if (i % 3 == 0 && i > 30) m.status = MessageStatus::kAcked;
      ASSERT_TRUE(store->messages().InsertMessage(m, {"a"}).ok());
    }
  }
  RawDb db(path);
  EXPECT_EQ(db.Query("SELECT count(*) FROM messages INDEXED BY "
                     "idx_messages_role_pending WHERE role_key_wire IS NOT "
                     "NULL AND status IN ('queued', 'delivered')"),
            "11");
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    if (analyzed == 1) {
      ASSERT_EQ(db.Exec("ANALYZE"), "");
    }
    for (const char* sql : {rows::kRoleBacklogSql, rows::kAllRoleBacklogsSql,
                            rows::kScopeBacklogSql}) {
      const std::vector<std::string> plan = db.QueryPlan(sql);
      ASSERT_FALSE(plan.empty());
      EXPECT_NE(plan[0].find("USING INDEX idx_messages_role_pending"),
                std::string::npos)
          << "analyzed=" << analyzed << ": " << plan[0] << "\n"
          << sql;
    }
  }
}

}  // namespace
}  // namespace hub::storage
