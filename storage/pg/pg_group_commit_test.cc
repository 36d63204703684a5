// Group commit on PostgreSQL: one failing operation fails PostgreSQL's
// whole transaction, so the writer replays the group with a savepoint per
// operation; the others still commit, and a lost connection is reconnected
// before the next group.
#include "storage/pg/pg_group_commit.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

class PgGroupCommit : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    std::unique_ptr<Connection> setup = Connect();
    ASSERT_NE(setup, nullptr);
    ASSERT_TRUE(setup->Exec("CREATE TABLE t (k TEXT PRIMARY KEY)").ok());
  }
  std::string Count() {
    absl::StatusOr<Result> r = Connect()->Exec("SELECT count(*) FROM t");
    return r.ok() ? std::string(r->Text(0, 0)) : "<error>";
  }
};

PgGroupCommitWriter::Op Insert(const std::string& key) {
  return [key](Connection& conn) {
    return conn.Run("INSERT INTO t VALUES ($1)", {key}).status();
  };
}

TEST_F(PgGroupCommit,
       AFailingOperationIsUndoneAloneAndTheRestOfItsGroupCommits) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  // Hold the writer in a first group so that the next ones queue up and
  // are taken as one group.
  absl::Notification entered, release;
  std::thread blocker([&] {
    EXPECT_TRUE(writer
                    .Run([&](Connection&) {
                      entered.Notify();
                      release.WaitForNotification();
                      return absl::OkStatus();
                    })
                    .ok());
  });
  entered.WaitForNotification();
  constexpr int kOps = 10;
  std::vector<absl::Status> results(kOps);
  std::vector<absl::Notification> done(kOps);
  for (int i = 0; i < kOps; ++i) {
    // Op 5 inserts op 4's key: a duplicate, which fails the transaction.
    writer.Submit(Insert(absl::StrCat("k", i == 5 ? 4 : i)),
                  [&results, &done, i](absl::Status s) {
                    results[i] = s;
                    done[i].Notify();
                  });
  }
  while (writer.queued() < kOps) std::this_thread::yield();
  release.Notify();
  blocker.join();
  for (absl::Notification& n : done) n.WaitForNotification();
  for (int i = 0; i < kOps; ++i) {
    if (i == 5) {
      EXPECT_EQ(ReasonOf(results[i]), "STORE_CONSTRAINT") << results[i];
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    }
  }
  EXPECT_EQ(Count(), "9");
  EXPECT_EQ(writer.stats().replays, 1);
}

TEST_F(PgGroupCommit, ALostConnectionFailsItsGroupAndTheNextGroupReconnects) {
  std::unique_ptr<Connection> conn = Connect();
  const int pid = conn->BackendPid();
  PgGroupCommitWriter writer(std::move(conn), 64);
  ASSERT_TRUE(writer.Run(Insert("before")).ok());
  ASSERT_TRUE(
      Connect()
          ->Query("SELECT pg_terminate_backend($1::int)", {std::to_string(pid)})
          .ok());
  absl::Status lost = writer.Run(Insert("lost"));
  EXPECT_EQ(ReasonOf(lost), "STORE_UNAVAILABLE") << lost;
  EXPECT_TRUE(writer.Run(Insert("after")).ok());
  EXPECT_EQ(Count(), "2");
}

}  // namespace
}  // namespace hub::storage::pg
