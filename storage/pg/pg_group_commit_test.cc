// Group commit on PostgreSQL: one failing operation fails PostgreSQL's
// whole transaction, so the writer replays the group with a savepoint per
// operation; the others still commit, and a lost connection is reconnected
// before the next group. A COMMIT whose answer is lost with the connection
// is looked up by the group's id: its callers hear OK when it committed,
// STORE_UNAVAILABLE (nothing changed) when it did not, and
// STORE_COMMIT_UNKNOWN only when the lookup cannot be made.
#include "storage/pg/pg_group_commit.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_schema.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

// Breaks `conn` under libpq as a network failure would: its socket becomes
// one end of a socket pair whose other end is closed, so libpq reads the
// end of the stream (an answer already on its way is lost with the old
// socket) and the server sees its client go.
void DropConnection(Connection& conn) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ASSERT_GE(dup2(pair[0], conn.Socket()), 0);
  close(pair[0]);
  close(pair[1]);
}

// The first column of the first row of `sql` on `conn`, "<error>" if none.
std::string Value(Connection& conn, const std::string& sql,
                  const std::vector<Param>& params = {}) {
  absl::StatusOr<Result> r = conn.Query(sql, params);
  return r.ok() && r->rows() > 0 ? std::string(r->Text(0, 0)) : "<error>";
}

// Waits until `sql` answers `want` on `conn` (polls; fails the test after
// 30 s).
void WaitFor(Connection& conn, const std::string& sql, const std::string& want,
             const std::vector<Param>& params = {}) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (Value(conn, sql, params) != want) {
    if (absl::Now() > give_up) {
      ADD_FAILURE() << sql << " never answered " << want;
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// A hook that breaks the writer's connection the first time it runs while
// `*armed`.
std::function<void(Connection&)> DropOnce(std::atomic<bool>* armed) {
  return [armed](Connection& conn) {
    if (armed->exchange(false)) DropConnection(conn);
  };
}
// The same, once `sql` answers `want` on `watcher` (the commit is visible
// from another session), for the hook after COMMIT was sent.
std::function<void(Connection&)> DropOnceVisible(std::atomic<bool>* armed,
                                                 Connection* watcher,
                                                 std::string sql,
                                                 std::string want) {
  return [=](Connection& conn) {
    if (!armed->exchange(false)) return;
    WaitFor(*watcher, sql, want);
    DropConnection(conn);
  };
}

class PgGroupCommit : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    std::unique_ptr<Connection> setup = Connect();
    ASSERT_NE(setup, nullptr);
    ASSERT_TRUE(MigratePostgres(*setup).ok());  // hub_commits
    ASSERT_TRUE(setup->Exec("CREATE TABLE t (k TEXT PRIMARY KEY)").ok());
    watcher_ = Connect();
    ASSERT_NE(watcher_, nullptr);
  }
  std::string Count() {
    absl::StatusOr<Result> r = Connect()->Exec("SELECT count(*) FROM t");
    return r.ok() ? std::string(r->Text(0, 0)) : "<error>";
  }
  // A writer whose engine runs `options`' hooks.
  std::unique_ptr<PgGroupCommitWriter> Writer(PgGroupEngineOptions options) {
    return std::make_unique<PgGroupCommitWriter>(
        Connect(), 64, /*completion_threads=*/2, /*observer=*/nullptr,
        /*on_rollback=*/nullptr, PgGroupEngine(std::move(options)));
  }

  // Another session, for the hooks (which run on the writer thread).
  std::unique_ptr<Connection> watcher_;
};

PgGroupCommitWriter::Op Insert(const std::string& key) {
  return [key](Connection& conn) {
    return conn.Run("INSERT INTO t VALUES ($1)", {key}).status();
  };
}

// Submits `ops` while the writer is held in a group of its own, so that
// they queue up and are taken as one group; returns their results.
std::vector<absl::Status> RunAsOneGroup(
    PgGroupCommitWriter& writer, std::vector<PgGroupCommitWriter::Op> ops,
    std::vector<PgGroupEngine::First> firsts = {}) {
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
  const int n = static_cast<int>(ops.size());
  std::vector<absl::Status> results(n);
  std::vector<absl::Notification> done(n);
  for (int i = 0; i < n; ++i) {
    writer.Submit(
        std::move(ops[i]),
        [&results, &done, i](absl::Status s) {
          results[i] = s;
          done[i].Notify();
        },
        {},
        i < static_cast<int>(firsts.size())
            ? std::optional<PgGroupEngine::First>(std::move(firsts[i]))
            : std::nullopt);
  }
  while (writer.queued() < n) std::this_thread::yield();
  release.Notify();
  blocker.join();
  for (absl::Notification& d : done) d.WaitForNotification();
  return results;
}

TEST_F(PgGroupCommit,
       AFailingOperationIsUndoneAloneAndTheRestOfItsGroupCommits) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  constexpr int kOps = 10;
  std::vector<PgGroupCommitWriter::Op> ops;
  for (int i = 0; i < kOps; ++i) {
    // Op 5 inserts op 4's key: a duplicate, which fails the transaction.
    ops.push_back(Insert(absl::StrCat("k", i == 5 ? 4 : i)));
  }
  std::vector<absl::Status> results = RunAsOneGroup(writer, std::move(ops));
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

TEST_F(PgGroupCommit,
       AGroupBeginsWithItsFirstStatementAndOneThatSendsNoneSendsNothing) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  auto backend_state = [this](Connection& conn) {
    return Value(*watcher_,
                 absl::StrCat("SELECT state FROM pg_stat_activity WHERE pid = ",
                              conn.BackendPid()));
  };
  const std::string records =
      Value(*watcher_, "SELECT count(*) FROM hub_commits");
  // An operation that sends nothing: no BEGIN, no commit record, no COMMIT.
  ASSERT_TRUE(writer
                  .Run([&](Connection& conn) {
                    EXPECT_EQ(backend_state(conn), "idle");
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM hub_commits"), records);
  // One that writes: BEGIN and the record went out with its statement.
  ASSERT_TRUE(writer
                  .Run([&](Connection& conn) {
                    EXPECT_EQ(backend_state(conn), "idle");
                    absl::Status s = Insert("first")(conn);
                    EXPECT_EQ(backend_state(conn), "idle in transaction");
                    absl::StatusOr<Result> mine = conn.Run(
                        "SELECT count(*) FROM hub_commits WHERE xmin = "
                        "pg_current_xact_id()::xid");
                    EXPECT_TRUE(mine.ok() && mine->Int(0, 0) == 1);
                    return s;
                  })
                  .ok());
  EXPECT_EQ(Count(), "1");
  // A refusal before any statement, then a write, in one group: no replay.
  std::vector<PgGroupCommitWriter::Op> ops;
  ops.push_back([](Connection&) {
    return absl::InvalidArgumentError("refused before writing");
  });
  ops.push_back(Insert("second"));
  std::vector<absl::Status> results = RunAsOneGroup(writer, std::move(ops));
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[1].ok()) << results[1];
  EXPECT_EQ(Count(), "2");
  EXPECT_EQ(writer.stats().replays, 0);
}

// An operation whose first statement is an insert of `key`, which then
// reports in `*seen` how many rows of t its transaction sees.
std::pair<PgGroupCommitWriter::Op, PgGroupEngine::First> InsertFirst(
    const std::string& key, std::string* seen) {
  auto first = std::make_shared<const Statement>(
      Statement{"INSERT INTO t VALUES ($1)", {key}});
  PgGroupCommitWriter::Op op = [first, seen](Connection& conn) {
    absl::StatusOr<Result> r = conn.RunFirst(*first);
    if (!r.ok()) return r.status();
    *seen = Value(conn, "SELECT count(*) FROM t");
    return absl::OkStatus();
  };
  return {std::move(op), std::move(first)};
}

// Submits InsertFirst operations for `keys` as one group; their results.
std::vector<absl::Status> RunInsertsFirst(PgGroupCommitWriter& writer,
                                          const std::vector<std::string>& keys,
                                          std::vector<std::string>* seen) {
  seen->assign(keys.size(), "");
  std::vector<PgGroupCommitWriter::Op> ops;
  std::vector<PgGroupEngine::First> firsts;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [op, first] = InsertFirst(keys[i], &(*seen)[i]);
    ops.push_back(std::move(op));
    firsts.push_back(std::move(first));
  }
  return RunAsOneGroup(writer, std::move(ops), std::move(firsts));
}

TEST_F(PgGroupCommit, ARunOfFirstStatementsIsSentAheadOfItsOperations) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  std::vector<std::string> seen;
  std::vector<absl::Status> results =
      RunInsertsFirst(writer, {"k0", "k1", "k2", "k3", "k4"}, &seen);
  for (const absl::Status& r : results) EXPECT_TRUE(r.ok()) << r;
  // Every insert of the run had run when the first operation looked.
  for (const std::string& s : seen) EXPECT_EQ(s, "5");
  EXPECT_EQ(Count(), "5");
  EXPECT_EQ(writer.stats().replays, 0);
}

TEST_F(PgGroupCommit, AFirstStatementThatFailsIsUndoneAloneAndTheRestCommit) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  std::vector<std::string> seen;
  // The fifth inserts the fourth's key.
  std::vector<absl::Status> results =
      RunInsertsFirst(writer, {"k0", "k1", "k2", "k3", "k3", "k5"}, &seen);
  for (size_t i = 0; i < results.size(); ++i) {
    if (i == 4) {
      EXPECT_EQ(ReasonOf(results[i]), "STORE_CONSTRAINT") << results[i];
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    }
  }
  EXPECT_EQ(Count(), "5");
  EXPECT_EQ(writer.stats().replays, 1);
  // Replayed with savepoints, in order: each saw the rows up to its own.
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2", "3", "4", "", "5"}));
}

// The writer's backend ended while the writer was idle (an operator's
// pg_terminate_backend, an idle timeout): once the backend is gone, the
// writer sees its connection closed before the next group and begins that
// group on a new one, so the write is not lost to the old connection.
TEST_F(PgGroupCommit, AWriteAfterTheIdleWritersBackendEndedSucceeds) {
  std::unique_ptr<Connection> conn = Connect();
  const int pid = conn->BackendPid();
  PgGroupCommitWriter writer(std::move(conn), 64);
  ASSERT_TRUE(writer.Run(Insert("before")).ok());
  ASSERT_TRUE(
      Connect()
          ->Query("SELECT pg_terminate_backend($1::int)", {std::to_string(pid)})
          .ok());
  WaitFor(*watcher_,
          "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", "0",
          {std::to_string(pid)});
  absl::Status after = writer.Run(Insert("after"));
  EXPECT_TRUE(after.ok()) << after;
  EXPECT_EQ(Count(), "2");
}

TEST_F(PgGroupCommit, ACommitWhoseAnswerIsLostAfterItCommittedAnswersOk) {
  std::atomic<bool> armed{true};
  PgGroupEngineOptions options;
  options.after_commit_sent = DropOnceVisible(
      &armed, watcher_.get(), "SELECT count(*) FROM t WHERE k = 'once'", "1");
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  absl::Status once = writer->Run(Insert("once"));
  EXPECT_TRUE(once.ok()) << once;
  EXPECT_FALSE(armed);
  EXPECT_EQ(Count(), "1");
  EXPECT_TRUE(writer->Run(Insert("next")).ok());  // on a new connection
  EXPECT_EQ(Count(), "2");
}

TEST_F(PgGroupCommit,
       ACommitLostBeforeItReachedTheServerAnswersUnavailableAndChangedNothing) {
  std::atomic<bool> armed{true};
  PgGroupEngineOptions options;
  options.before_commit = DropOnce(&armed);
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  absl::Status lost = writer->Run(Insert("lost"));
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_EQ(ReasonOf(lost), "STORE_UNAVAILABLE") << lost;
  EXPECT_EQ(Count(), "0");
  // Neither the group's id nor the lookup's stayed behind.
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM hub_commits"), "0");
  EXPECT_TRUE(writer->Run(Insert("retried")).ok());
  EXPECT_EQ(Count(), "1");
}

TEST_F(
    PgGroupCommit,
    AGroupWhoseBackendWasTerminatedBeforeCommitAnswersUnavailableAndChangedNothing) {
  std::atomic<bool> armed{true};
  PgGroupEngineOptions options;
  options.before_commit = [&](Connection& conn) {
    if (!armed.exchange(false)) return;
    const std::string pid = std::to_string(conn.BackendPid());
    ASSERT_EQ(Value(*watcher_, "SELECT pg_terminate_backend($1::int)", {pid}),
              "t");
    WaitFor(*watcher_, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            "0", {pid});
  };
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  absl::Status lost = writer->Run(Insert("lost"));
  EXPECT_EQ(ReasonOf(lost), "STORE_UNAVAILABLE") << lost;
  EXPECT_EQ(Count(), "0");
  EXPECT_TRUE(writer->Run(Insert("retried")).ok());
  EXPECT_EQ(Count(), "1");
}

TEST_F(PgGroupCommit, ACommitTheServerRefusesIsRolledBackWithoutALookUp) {
  ASSERT_TRUE(watcher_
                  ->Exec("CREATE TABLE d (k TEXT UNIQUE DEFERRABLE "
                         "INITIALLY DEFERRED)")
                  .ok());
  std::vector<int> pids;  // the writer's backend at each COMMIT
  PgGroupEngineOptions options;
  options.before_commit = [&](Connection& conn) {
    pids.push_back(conn.BackendPid());
  };
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  // The duplicate is found at COMMIT, which fails the whole group.
  absl::Status refused = writer->Run([](Connection& conn) {
    absl::Status s = conn.Run("INSERT INTO d VALUES ('x')").status();
    if (s.ok()) s = conn.Run("INSERT INTO d VALUES ('x')").status();
    return s;
  });
  EXPECT_EQ(ReasonOf(refused), "STORE_CONSTRAINT") << refused;
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM d"), "0");
  EXPECT_TRUE(writer->Run(Insert("after")).ok());
  // No reconnect: the refusal was an answer, nothing to look up.
  ASSERT_EQ(pids.size(), 2u);
  EXPECT_EQ(pids[0], pids[1]);
}

// An operation the database refuses for a lock conflict the first two
// times it runs (a deadlock, as another hub's group would cause: in its
// group, then in that group's replay with savepoints), then not. `seq` is
// a sequence, which a rollback does not undo.
PgGroupCommitWriter::Op RefusedOnce(const std::string& key,
                                    const std::string& seq) {
  return [key, seq](Connection& conn) {
    absl::Status s =
        conn.Run(absl::StrCat("DO $$ BEGIN IF nextval('", seq,
                              "') <= 2 THEN RAISE EXCEPTION 'deadlock' USING "
                              "ERRCODE = 'deadlock_detected'; END IF; END $$"))
            .status();
    if (!s.ok()) return s;
    return conn.Run("INSERT INTO t VALUES ($1)", {key}).status();
  };
}

TEST_F(PgGroupCommit,
       AnOperationRefusedForADeadlockRunsAgainInALaterGroupAndSucceeds) {
  ASSERT_TRUE(watcher_->Exec("CREATE SEQUENCE once").ok());
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  constexpr int kOps = 6;
  std::vector<PgGroupCommitWriter::Op> ops;
  for (int i = 0; i < kOps; ++i) {
    const std::string key = absl::StrCat("k", i);
    ops.push_back(i == 2 ? RefusedOnce(key, "once") : Insert(key));
  }
  std::vector<absl::Status> results = RunAsOneGroup(writer, std::move(ops));
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  }
  EXPECT_EQ(Count(), absl::StrCat(kOps));
  const PgGroupCommitWriter::Stats stats = writer.stats();
  EXPECT_EQ(stats.replays, 1);  // the refused statement failed the group
  EXPECT_EQ(stats.lock_retries, 1);
  EXPECT_EQ(stats.ops, kOps + 1);  // each answered once
}

TEST_F(PgGroupCommit,
       AWriteCommittedOnItsCallersThreadAndRefusedForADeadlockRunsAgain) {
  ASSERT_TRUE(watcher_->Exec("CREATE SEQUENCE here").ok());
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  absl::Status result;
  {
    storage::CommitOnThisThread here;
    // Refused twice on this thread (without, then with a savepoint), then
    // queued and granted by the writer thread.
    result = writer.Run(RefusedOnce("a", "here"));
  }
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(Count(), "1");
  EXPECT_EQ(writer.stats().lock_retries, 1);
  EXPECT_EQ(writer.stats().ops, 1);
}

TEST_F(PgGroupCommit, AHandlersThreadCommitsOnlyItsOwnWriteAndLeadsNoGroups) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  absl::Notification entered, release;
  std::thread::id handler_id;
  std::thread handler([&] {
    handler_id = std::this_thread::get_id();
    storage::CommitOnThisThread here;
    writer.Submit(
        [&](Connection& conn) {
          entered.Notify();
          release.WaitForNotification();
          return Insert("own")(conn);
        },
        [](absl::Status s) { EXPECT_TRUE(s.ok()) << s; });
  });
  entered.WaitForNotification();
  std::thread::id ran;
  absl::Notification done;
  writer.Submit(
      [&](Connection& conn) {
        ran = std::this_thread::get_id();
        return Insert("queued")(conn);
      },
      [&](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        done.Notify();
      });
  while (writer.queued() < 1) std::this_thread::yield();
  release.Notify();
  handler.join();
  done.WaitForNotification();
  // A PostgreSQL commit waits for round trips: the writer thread took what
  // queued behind the handler's write, not the handler's thread.
  EXPECT_NE(ran, handler_id);
  EXPECT_EQ(writer.stats().led_groups, 1);
  EXPECT_EQ(Count(), "2");
}

TEST_F(PgGroupCommit, ACommitRefusedForASerializationFailureRunsItsGroupAgain) {
  // A deferred trigger that fails the first COMMIT that reaches it, the way
  // two hubs' change-log counters can deadlock at COMMIT.
  ASSERT_TRUE(watcher_
                  ->Exec("CREATE SEQUENCE at_commit; "
                         "CREATE FUNCTION refuse_once() RETURNS trigger "
                         "LANGUAGE plpgsql AS $$ BEGIN "
                         "IF nextval('at_commit') = 1 THEN RAISE EXCEPTION "
                         "'conflict' USING ERRCODE = 'serialization_failure'; "
                         "END IF; RETURN NULL; END $$; "
                         "CREATE CONSTRAINT TRIGGER refuse_once AFTER INSERT "
                         "ON t DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                         "EXECUTE FUNCTION refuse_once()")
                  .ok());
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  EXPECT_TRUE(writer.Run(Insert("a")).ok());
  EXPECT_EQ(Count(), "1");
  EXPECT_EQ(writer.stats().lock_retries, 1);
}

TEST_F(PgGroupCommit, AnOperationRefusedForLockConflictsEveryTimeGivesUpBusy) {
  PgGroupCommitWriter writer(Connect(), /*max_group_size=*/64);
  int runs = 0;
  absl::Status s = writer.Run([&runs](Connection& conn) {
    ++runs;
    return conn
        .Run(
            "DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING "
            "ERRCODE = 'deadlock_detected'; END $$")
        .status();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(ReasonOf(s), "STORE_BUSY") << s;
  // Each group runs it twice (without, then with a savepoint).
  EXPECT_EQ(runs, 2 * (1 + storage::kLockRetries));
  EXPECT_EQ(writer.stats().lock_retries, storage::kLockRetries);
}

TEST_F(PgGroupCommit,
       ACommitWhoseOutcomeCannotBeLearnedAnswersStoreCommitUnknown) {
  std::atomic<bool> armed{true};
  PgGroupEngineOptions options;
  options.resolve_timeout = absl::Milliseconds(300);
  options.after_commit_sent = [&](Connection& conn) {
    if (!armed.exchange(false)) return;
    DropConnection(conn);
    ASSERT_TRUE(server_->Stop("fast").ok());
  };
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  absl::Status unknown = writer->Run(Insert("maybe"));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnavailable) << unknown;
  EXPECT_EQ(ReasonOf(unknown), "STORE_COMMIT_UNKNOWN") << unknown;
  EXPECT_NE(unknown.message().find("may or may not have been written"),
            std::string::npos)
      << unknown;
  ASSERT_TRUE(server_->Start().ok());
  absl::Status after = writer->Run(Insert("after"));
  EXPECT_TRUE(after.ok()) << after;
  const std::string count = Count();
  EXPECT_TRUE(count == "1" || count == "2") << count;
}

// A server restarted while the writer was idle closed its connection;
// libpq only learns that by reading. The next write still succeeds the
// first time: the writer reconnects before its group begins.
TEST_F(PgGroupCommit, AWriteAfterAServerRestartSucceedsTheFirstTime) {
  std::unique_ptr<PgGroupCommitWriter> writer = Writer({});
  ASSERT_TRUE(writer->Run(Insert("before")).ok());
  for (const char* mode : {"immediate", "fast"}) {
    // The test server runs without synchronous commits: make what was
    // committed survive an immediate stop.
    ASSERT_TRUE(Connect()->Exec("CHECKPOINT").ok());
    ASSERT_TRUE(server_->Stop(mode).ok());
    ASSERT_TRUE(server_->Start().ok());
    absl::Status after = writer->Run(Insert(absl::StrCat("after ", mode)));
    EXPECT_TRUE(after.ok()) << mode << ": " << after;
  }
  EXPECT_EQ(Count(), "3");
}

// FindCommit on its own: a transaction that still holds the id (an old
// backend busy with COMMIT, or unaware its client is gone) is waited for.
class FindCommitTest : public PgGroupCommit {
 protected:
  // Starts a transaction holding `id_` on `old_`, and a lookup of it that
  // gives up at `deadline`; returns once the lookup waits for the holder.
  void LookUpWhileHeld(absl::Time deadline) {
    old_ = Connect();
    ASSERT_TRUE(old_->Exec("BEGIN").ok());
    ASSERT_TRUE(
        old_->Query("INSERT INTO hub_commits (id) VALUES ($1)", {id_}).ok());
    looker_ = Connect();
    lookup_ = std::thread(
        [this, deadline] { found_ = FindCommit(*looker_, id_, deadline); });
    WaitFor(*watcher_,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
            "current_database() AND wait_event_type = 'Lock' AND query LIKE "
            "'INSERT INTO hub_commits%'",
            "1");
  }
  void TearDown() override {
    if (lookup_.joinable()) lookup_.join();
  }

  const std::string id_ = NewUuidV7();
  std::unique_ptr<Connection> old_, looker_;
  std::thread lookup_;
  absl::StatusOr<bool> found_ = absl::UnknownError("not looked up");
};

TEST_F(FindCommitTest, ALookUpWaitsForTheOldTransactionAndSeesItCommit) {
  LookUpWhileHeld(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(old_->Exec("COMMIT").ok());
  lookup_.join();
  ASSERT_TRUE(found_.ok()) << found_.status();
  EXPECT_TRUE(*found_);
}

TEST_F(FindCommitTest, ALookUpWaitsForTheOldTransactionAndSeesItRollBack) {
  LookUpWhileHeld(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(old_->Exec("ROLLBACK").ok());
  lookup_.join();
  ASSERT_TRUE(found_.ok()) << found_.status();
  EXPECT_FALSE(*found_);
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM hub_commits"), "0");
}

TEST_F(FindCommitTest, ALookUpGivesUpAtItsDeadlineWhileTheIdIsHeld) {
  LookUpWhileHeld(absl::Now() + absl::Milliseconds(500));
  lookup_.join();
  EXPECT_EQ(ReasonOf(found_.status()), "STORE_BUSY") << found_.status();
  ASSERT_TRUE(old_->Exec("ROLLBACK").ok());
}

TEST_F(PgGroupCommit, CommitIdsPastTheRetentionArePrunedAsGroupsGo) {
  // An old row, and one whose id looks as old (its hub's clock is behind)
  // but which the database's clock says is fresh.
  ASSERT_TRUE(watcher_
                  ->Exec("INSERT INTO hub_commits VALUES "
                         "('00000000-0001-7000-8000-000000000000', "
                         "now() - interval '11 minutes'), "
                         "('00000000-0002-7000-8000-000000000000', now())")
                  .ok());
  PgGroupEngineOptions options;
  options.prune_every = 2;
  std::unique_ptr<PgGroupCommitWriter> writer = Writer(options);
  ASSERT_TRUE(writer->Run(Insert("a")).ok());
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM hub_commits"), "3");
  ASSERT_TRUE(writer->Run(Insert("b")).ok());
  EXPECT_EQ(
      Value(*watcher_,
            "SELECT string_agg(id::text, ',' ORDER BY id) FROM "
            "hub_commits WHERE id < '00000000-0003-0000-0000-000000000000'"),
      "00000000-0002-7000-8000-000000000000");
  EXPECT_EQ(Value(*watcher_, "SELECT count(*) FROM hub_commits"), "3");
}

// Through the whole store: the registration a caller was told succeeded
// happened once, and one it was told failed did not happen (so its retry
// is the only one).
class PgStoreCommit : public PgGroupCommit {
 protected:
  std::unique_ptr<PostgresStore> Open(PgGroupEngineOptions commits) {
    PostgresStoreOptions options;
    options.conninfo = server_->ConnInfo(database_);
    options.commits = std::move(commits);
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  static AgentRegistration Reg() {
    AgentRegistration r;
    r.agent_id = "agent-1";
    r.cli = "codex";
    r.now_ms = 1'700'000'000'000;
    return r;
  }
  std::string Generation() {
    return Value(*watcher_,
                 "SELECT presence_generation FROM agents WHERE agent_id = "
                 "'agent-1'");
  }
};

TEST_F(PgStoreCommit, ARegistrationWhoseCommitAnswerWasLostHappenedOnce) {
  std::atomic<bool> armed{false};
  PgGroupEngineOptions commits;
  commits.after_commit_sent = DropOnceVisible(
      &armed, watcher_.get(),
      "SELECT presence_generation FROM agents WHERE agent_id = 'agent-1'", "2");
  std::unique_ptr<PostgresStore> store = Open(commits);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->agents().RegisterAgent(Reg()).ok());
  armed = true;
  absl::StatusOr<AgentRecord> again = store->agents().RegisterAgent(Reg());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(armed);
  EXPECT_EQ(again->presence_generation, 2);
  EXPECT_EQ(Generation(), "2");
}

TEST_F(PgStoreCommit,
       ARegistrationLostBeforeCommitDidNotHappenSoItsRetryIsOne) {
  std::atomic<bool> armed{false};
  PgGroupEngineOptions commits;
  commits.before_commit = DropOnce(&armed);
  std::unique_ptr<PostgresStore> store = Open(commits);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->agents().RegisterAgent(Reg()).ok());
  armed = true;
  absl::StatusOr<AgentRecord> lost = store->agents().RegisterAgent(Reg());
  EXPECT_EQ(ReasonOf(lost.status()), "STORE_UNAVAILABLE") << lost.status();
  EXPECT_EQ(Generation(), "1");
  absl::StatusOr<AgentRecord> retried = store->agents().RegisterAgent(Reg());
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->presence_generation, 2);
}

}  // namespace
}  // namespace hub::storage::pg
