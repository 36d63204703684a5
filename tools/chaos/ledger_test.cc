#include "tools/chaos/ledger.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/chaos/store_snapshot.h"

namespace hub::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The columns of hub's schema the ledger reads.
class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/ledger-", getpid(), "-",
                         counter_++, ".sqlite");
    std::remove(path_.c_str());
    Exec(
        "CREATE TABLE agents (agent_id TEXT PRIMARY KEY, presence_generation "
        "INTEGER);"
        "CREATE TABLE message_inbox (message_id TEXT, agent_id TEXT, "
        "acked_at_ms INTEGER);"
        "CREATE TABLE role_registry (role_key_wire TEXT PRIMARY KEY, "
        "project_id TEXT, role_kind TEXT, scope_id TEXT, state TEXT, "
        "holder_agent_id TEXT, epoch INTEGER, version INTEGER DEFAULT 0);");
  }

  void Exec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error),
              SQLITE_OK)
        << (error ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  std::vector<std::string> Check() {
    std::vector<std::string> violations;
    ledger_.Check([this] { return ReadSqliteSnapshot(path_); }, &violations);
    return violations;
  }

  static int counter_;
  std::string path_;
  Ledger ledger_;
};

int LedgerTest::counter_ = 0;

TEST_F(LedgerTest, EverythingAcknowledgedAndStoredPasses) {
  Exec(
      "INSERT INTO agents VALUES ('a', 3);"
      "INSERT INTO message_inbox VALUES ('m1', 'a', 17);"
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 5, 1);");
  ledger_.Registered("a", 2);
  ledger_.Published("m1", "a");
  ledger_.Acked("m1", "a");
  ledger_.Reserved("rk2.x", 5, "a", 1);
  EXPECT_THAT(Check(), IsEmpty());
}

TEST_F(LedgerTest, AMissingAgentOrAGenerationThatWentBackIsAViolation) {
  Exec("INSERT INTO agents VALUES ('a', 1);");
  ledger_.Registered("a", 2);
  ledger_.Registered("b", 1);
  std::vector<std::string> v = Check();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_THAT(v[0], HasSubstr("agent a generation went back"));
  EXPECT_THAT(v[1], HasSubstr("acknowledged agent b missing"));
}

TEST_F(LedgerTest, AMissingPublishOrAckIsAViolation) {
  Exec("INSERT INTO message_inbox VALUES ('m1', 'a', NULL);");
  ledger_.Published("m1", "a");
  ledger_.Published("m2", "a");
  ledger_.Acked("m1", "a");
  EXPECT_THAT(Check(),
              ElementsAre(HasSubstr("acknowledged publish m2 to a missing"),
                          HasSubstr("acknowledged ack of m1 by a missing")));
}

TEST_F(LedgerTest, AnEpochBelowAnAcknowledgedOneIsAViolation) {
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 4, 0);");
  ledger_.Reserved("rk2.x", 5, "b", 0);
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("epoch went back: 4 < "
                                             "acknowledged 5")));
}

TEST_F(LedgerTest, AStoredEpochBelowThePreviousCheckIsAViolation) {
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 7, 0);");
  EXPECT_THAT(Check(), IsEmpty());
  Exec("UPDATE role_registry SET epoch = 6;");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("epoch went back: 6 after 7")));
}

TEST_F(LedgerTest, TwoHoldersAtOneEpochAreAViolation) {
  ledger_.Reserved("rk2.x", 5, "a", 10);
  ledger_.Reserved("rk2.x", 5, "b", 11);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'c', 5, 11);");
  std::vector<std::string> v = Check();
  EXPECT_THAT(v, ElementsAre(HasSubstr("epoch 5 held by c but acknowledged "
                                       "to a"),
                             HasSubstr("two holders of rk2.x at epoch 5: "
                                       "reservation of a (version 10) and "
                                       "reservation of b (version 11)")));
}

TEST_F(LedgerTest, AnActAtAnotherHoldersEpochIsAViolationInAnyOrder) {
  // Recorded out of version order, as threads do.
  ledger_.Acted("rk2.x", 5, "b", 12);
  ledger_.Reserved("rk2.x", 6, "b", 13);
  ledger_.Reserved("rk2.x", 5, "a", 10);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'b', 6, 13);");
  EXPECT_THAT(Check(),
              ElementsAre(HasSubstr("two holders of rk2.x at epoch 5: "
                                    "reservation of a (version 10) and act of "
                                    "b (version 12)")));
}

TEST_F(LedgerTest, TwoConfirmedActivationsAtOneEpochAreAViolation) {
  ledger_.Activated("rk2.l", 3, "a", 7);
  ledger_.Activated("rk2.l", 3, "b", 9);
  ledger_.Activated("rk2.l", 4, "b", 11);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.l', 'p', 'lead', 's', 'active', "
      "'b', 4, 11);");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("two holders of rk2.l at epoch 3: "
                                             "activation of a (version 7) and "
                                             "activation of b (version 9)")));
  EXPECT_EQ(ledger_.acked_activations(), 3);
}

TEST_F(LedgerTest, AHolderActingAfterANewerEpochIsAViolation) {
  ledger_.Reserved("rk2.x", 5, "a", 10);
  ledger_.Reserved("rk2.x", 6, "b", 11);
  ledger_.Acted("rk2.x", 5, "a", 12);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'b', 6, 12);");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr(
                           "rk2.x epoch went back between acknowledged "
                           "writes: act of a at epoch 5 (version 12) after "
                           "reservation of b at epoch 6 (version 11)")));
}

TEST_F(LedgerTest, TwoWritesAtOneVersionAreAViolation) {
  ledger_.Reserved("rk2.x", 5, "a", 10);
  ledger_.Acted("rk2.x", 5, "a", 11);
  ledger_.Acted("rk2.x", 5, "a", 11);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 5, 11);");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("two writes of rk2.x "
                                             "acknowledged at version 11")));
}

TEST_F(LedgerTest, AStoredVersionBelowAnAcknowledgedOneIsAViolation) {
  ledger_.Reserved("rk2.x", 5, "a", 10);
  ledger_.Acted("rk2.x", 5, "a", 11);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 5, 10);");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("version went back: 10 < "
                                             "acknowledged 11")));
}

TEST_F(LedgerTest, TwoActiveRowsForOneRoleAreAViolation) {
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
      "'a', 1, 1);"
      "INSERT INTO role_registry VALUES ('rk2.y', 'p', 'cto', '', 'active', "
      "'b', 1, 1);");
  EXPECT_THAT(Check(), ElementsAre(HasSubstr("two active rows for role "
                                             "p/cto/")));
}

TEST_F(LedgerTest, AnUnreadableStoreIsAViolation) {
  std::vector<std::string> violations;
  ledger_.Check(
      [] { return absl::StatusOr<StoreSnapshot>(absl::UnavailableError("x")); },
      &violations);
  EXPECT_THAT(violations, ElementsAre(HasSubstr("cannot read the store")));
}

TEST_F(LedgerTest, APublishNeverListedToItsRecipientIsUndelivered) {
  ledger_.Published("m1", "a");
  ledger_.Published("m2", "a");
  ledger_.Published("m3", "b");
  ledger_.Delivered("m1", "a");
  ledger_.Acked("m3", "b");
  EXPECT_EQ(ledger_.Undelivered("a"), 1);
  EXPECT_EQ(ledger_.Undelivered("b"), 0);
  std::vector<std::string> violations;
  ledger_.CheckDelivered(&violations);
  EXPECT_THAT(violations, ElementsAre(HasSubstr("acknowledged publish m2 to "
                                                "a never delivered")));
}

TEST_F(LedgerTest, AFencedHolderAtTheSameEpochIsNoViolation) {
  ledger_.Reserved("rk2.x", 5, "a", 3);
  Exec(
      "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', "
      "'electable', NULL, 5, 4);");
  EXPECT_THAT(Check(), IsEmpty());
}

}  // namespace
}  // namespace hub::chaos
