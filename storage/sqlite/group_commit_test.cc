// Group commit: many callers share one transaction, each gets its own
// result, and one operation's failure neither fails nor undoes the others.
#include "storage/sqlite/group_commit.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::RawDb;

std::unique_ptr<Connection> OpenTable(const std::string& path) {
  auto conn =
      Connection::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(conn.ok());
  EXPECT_TRUE((*conn)
                  ->Exec("PRAGMA journal_mode = WAL; "
                         "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER);"
                         "INSERT INTO t VALUES ('fence', 1);")
                  .ok());
  return std::move(*conn);
}

GroupCommitWriter::Op Insert(const std::string& key) {
  return [key](Connection& conn) {
    auto stmt = conn.Prepare("INSERT INTO t VALUES (?, 0)");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, absl::string_view(key));
    return stmt->Run();
  };
}

void WaitForQueue(GroupCommitWriter& writer, int n) {
  for (int i = 0; i < 2000 && writer.queued() < n; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(writer.queued(), n);
}

// Holds the writer inside a first group until `release` is notified, so that
// the next callers queue up behind it. Returns once the writer is held; the
// caller joins the returned thread after notifying `release`.
std::thread HoldTheWriter(GroupCommitWriter& writer,
                          absl::Notification& release) {
  auto entered = std::make_shared<absl::Notification>();
  std::thread blocker([&writer, &release, entered] {
    EXPECT_TRUE(writer
                    .Run([&](Connection&) {
                      entered->Notify();
                      release.WaitForNotification();
                      return absl::OkStatus();
                    })
                    .ok());
  });
  entered->WaitForNotification();
  return blocker;
}

TEST(GroupCommit, QueuedOperationsCommitInOneGroupEachWithItsOwnResult) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);

  absl::Notification release;
  std::thread blocker = HoldTheWriter(writer, release);

  absl::Status results[5];
  std::vector<std::thread> callers;
  callers.emplace_back([&] { results[0] = writer.Run(Insert("a")); });
  callers.emplace_back([&] { results[1] = writer.Run(Insert("fence")); });
  callers.emplace_back([&] { results[2] = writer.Run(Insert("b")); });
  callers.emplace_back([&] {
    // Writes a row, then fails: its own write must be undone.
    results[3] = writer.Run([](Connection& conn) {
      absl::Status s = Insert("partial")(conn);
      if (!s.ok()) return s;
      return AbortedError("LOST_FENCE", "changed-row count was 0");
    });
  });
  callers.emplace_back([&] { results[4] = writer.Run(Insert("c")); });
  WaitForQueue(writer, 5);
  release.Notify();
  blocker.join();
  for (std::thread& t : callers) t.join();

  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(ReasonOf(results[1]), "STORE_CONSTRAINT");
  EXPECT_TRUE(results[2].ok());
  EXPECT_EQ(ReasonOf(results[3]), "LOST_FENCE");
  EXPECT_TRUE(results[4].ok());
  GroupCommitWriter::Stats stats = writer.stats();
  EXPECT_EQ(stats.groups, 2);
  EXPECT_EQ(stats.ops, 6);
  // The failure after a write made the second group run again with a
  // savepoint per op; the duplicate key changed no row and needed none.
  EXPECT_EQ(stats.replays, 1);

  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT group_concat(k, ',') FROM "
                      "(SELECT k FROM t ORDER BY k)"),
            "a,b,c,fence");
}

TEST(GroupCommit, OnlyAGroupThatDidNotCommitRunsTheRollbackHook) {
  std::string path = FreshDbPath();
  std::atomic<int> rollbacks{0};
  GroupCommitWriter writer(OpenTable(path), 64, /*completion_threads=*/2,
                           /*observer=*/nullptr, [&] { ++rollbacks; });
  ASSERT_TRUE(writer.Run(Insert("a")).ok());
  // An op failing alone is undone to its savepoint; the group commits.
  ASSERT_FALSE(writer.Run(Insert("a")).ok());
  EXPECT_EQ(rollbacks.load(), 0);

  RawDb holder(path);  // holds the write lock: BEGIN IMMEDIATE is busy
  ASSERT_EQ(holder.Exec("BEGIN IMMEDIATE"), "");
  EXPECT_FALSE(writer.Run(Insert("b")).ok());
  EXPECT_EQ(rollbacks.load(), 1);
  ASSERT_EQ(holder.Exec("ROLLBACK"), "");
  EXPECT_TRUE(writer.Run(Insert("b")).ok());
  EXPECT_EQ(rollbacks.load(), 1);
}

TEST(GroupCommit, AFailureThatWroteNothingCommitsTheGroupWithoutAReplay) {
  std::string path = FreshDbPath();
  std::atomic<int> rollbacks{0};
  GroupCommitWriter writer(OpenTable(path), 64, /*completion_threads=*/2,
                           /*observer=*/nullptr, [&] { ++rollbacks; });
  // A fence lost before any write, and a constraint that aborted its only
  // statement: neither changed a row.
  EXPECT_EQ(ReasonOf(writer.Run([](Connection&) {
              return AbortedError("LOST_FENCE", "changed-row count was 0");
            })),
            "LOST_FENCE");
  EXPECT_EQ(ReasonOf(writer.Run(Insert("fence"))), "STORE_CONSTRAINT");
  EXPECT_EQ(writer.stats().replays, 0);
  EXPECT_EQ(rollbacks.load(), 0);
}

TEST(GroupCommit, AReplayRunsEveryOpOfTheGroupAgainAndKeepsAllButTheFailedOne) {
  std::string path = FreshDbPath();
  std::atomic<int> rollbacks{0};
  GroupCommitWriter writer(OpenTable(path), 64, /*completion_threads=*/2,
                           /*observer=*/nullptr, [&] { ++rollbacks; });
  absl::Notification release;
  std::thread blocker = HoldTheWriter(writer, release);

  // Each op counts its runs; the second writes then fails.
  std::atomic<int> runs[3] = {0, 0, 0};
  absl::Status results[3];
  std::vector<std::thread> callers;
  callers.emplace_back([&] {
    results[0] = writer.Run([&](Connection& conn) {
      ++runs[0];
      return Insert("before")(conn);
    });
  });
  WaitForQueue(writer, 1);
  callers.emplace_back([&] {
    results[1] = writer.Run([&](Connection& conn) {
      ++runs[1];
      absl::Status s = Insert("undone")(conn);
      if (!s.ok()) return s;
      return InvalidArgumentError("BAD_INPUT", "found after the write");
    });
  });
  WaitForQueue(writer, 2);
  callers.emplace_back([&] {
    results[2] = writer.Run([&](Connection& conn) {
      ++runs[2];
      return Insert("after")(conn);
    });
  });
  WaitForQueue(writer, 3);
  release.Notify();
  blocker.join();
  for (std::thread& t : callers) t.join();

  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(ReasonOf(results[1]), "BAD_INPUT");
  EXPECT_TRUE(results[2].ok());
  // The first run stopped at the failed op; the replay ran all three.
  EXPECT_EQ(runs[0].load(), 2);
  EXPECT_EQ(runs[1].load(), 2);
  EXPECT_EQ(runs[2].load(), 1);
  EXPECT_EQ(writer.stats().replays, 1);
  EXPECT_EQ(rollbacks.load(), 1);  // caches dropped before the replay
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT group_concat(k, ',') FROM "
                      "(SELECT k FROM t ORDER BY k)"),
            "after,before,fence");
}

TEST(GroupCommit, ACallbackThatWritesAndWaitsIsWokenWithOneCompletionThread) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64, /*completion_threads=*/1);
  absl::Notification finished;
  absl::Notification release;
  std::thread blocker;
  absl::Status inner;
  writer.Submit(Insert("first"), [&](absl::Status s) {
    ASSERT_TRUE(s.ok());
    // With the writer busy, the only completion thread parks here (it does
    // not commit "second" itself); the writer must wake it.
    blocker = HoldTheWriter(writer, release);
    inner = writer.Run(Insert("second"));
    finished.Notify();
  });
  WaitForQueue(writer, 1);
  release.Notify();
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)));
  blocker.join();
  EXPECT_TRUE(inner.ok());
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k IN ('first', 'second')"),
            "2");
}

// An Insert that also tells which thread ran it.
GroupCommitWriter::Op InsertOn(const std::string& key, std::thread::id* on) {
  return [key, on](Connection& conn) {
    *on = std::this_thread::get_id();
    return Insert(key)(conn);
  };
}

TEST(GroupCommit, AWriteOnAnIdleWriterCommitsOnItsCallersThreadWhenItMay) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);
  const std::thread::id me = std::this_thread::get_id();

  // Without one, a Submit goes to the writer thread; a Run, whose thread
  // waits anyway, commits on it.
  std::thread::id ran;
  absl::Notification queued;
  writer.Submit(InsertOn("queued", &ran), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    queued.Notify();
  });
  queued.WaitForNotification();
  EXPECT_NE(ran, me);
  ASSERT_TRUE(writer.Run(InsertOn("run", &ran)).ok());
  EXPECT_EQ(ran, me);

  // With one, on an idle writer: committed here, the callback here too,
  // before Submit returns.
  std::thread::id answered;
  bool done = false;
  {
    CommitOnThisThread here;
    writer.Submit(InsertOn("here", &ran), [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      answered = std::this_thread::get_id();
      done = true;
    });
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(ran, me);
  EXPECT_EQ(answered, me);
  {
    CommitOnThisThread here;
    ASSERT_TRUE(writer.Run(InsertOn("run here", &ran)).ok());
  }
  EXPECT_EQ(ran, me);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT group_concat(k, ',') FROM (SELECT k FROM t "
                      "WHERE k != 'fence' ORDER BY k)"),
            "here,queued,run,run here");
  EXPECT_EQ(writer.stats().groups, 4);
  EXPECT_EQ(writer.stats().ops, 4);
}

TEST(GroupCommit, AWriteUnderCommitOnThisThreadQueuesWhileTheWriterIsBusy) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);
  absl::Notification release;
  std::thread blocker = HoldTheWriter(writer, release);
  std::thread::id ran;
  std::thread::id answered;
  absl::Notification done;
  {
    CommitOnThisThread here;
    writer.Submit(InsertOn("behind", &ran), [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      answered = std::this_thread::get_id();
      done.Notify();
    });
  }
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_EQ(writer.queued(), 1);
  release.Notify();
  blocker.join();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_NE(ran, std::this_thread::get_id());
  EXPECT_NE(answered, std::this_thread::get_id());
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k = 'behind'"), "1");
}

// Starts a thread that leads the writer (a Submit under CommitOnThisThread
// on an idle writer) with a write of "first" held inside its group until
// `release` is notified, `done` its callback; returns once the write is
// held, so that writes submitted next queue behind the leader.
std::thread LeadHeld(GroupCommitWriter& writer, absl::Notification& release,
                     GroupCommitWriter::Done done,
                     std::thread::id* leader_id = nullptr) {
  auto entered = std::make_shared<absl::Notification>();
  std::thread leader([&writer, &release, entered, leader_id,
                      done = std::move(done)]() mutable {
    if (leader_id != nullptr) *leader_id = std::this_thread::get_id();
    CommitOnThisThread here;
    writer.Submit(
        [&release, entered](Connection& conn) {
          entered->Notify();
          release.WaitForNotification();
          return Insert("first")(conn);
        },
        std::move(done));
  });
  entered->WaitForNotification();
  return leader;
}

TEST(GroupCommit, ALeaderAlsoCommitsAndAnswersWhatQueuedWhileItCommitted) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);
  // The writer thread must not take the queue from the leader here.
  writer.SetLeaderStallTimeoutForTesting(absl::Minutes(10));
  absl::Notification release;
  std::thread::id leader_id;
  std::thread leader = LeadHeld(
      writer, release, [](absl::Status s) { EXPECT_TRUE(s.ok()) << s; },
      &leader_id);
  // Queued behind the leader's group, from a thread without the scope.
  std::thread::id ran[2];
  std::thread::id answered[2];
  std::atomic<int> done{0};
  for (int i = 0; i < 2; ++i) {
    writer.Submit(InsertOn(absl::StrCat("queued ", i), &ran[i]),
                  [&, i](absl::Status s) {
                    EXPECT_TRUE(s.ok()) << s;
                    answered[i] = std::this_thread::get_id();
                    done.fetch_add(1);
                  });
  }
  WaitForQueue(writer, 2);
  release.Notify();
  leader.join();  // Submit returned once the leader had answered them all
  EXPECT_EQ(done.load(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ran[i], leader_id);
    EXPECT_EQ(answered[i], leader_id);
  }
  EXPECT_EQ(writer.stats().groups, 2);
  EXPECT_EQ(writer.stats().led_groups, 2);
  EXPECT_EQ(writer.stats().leader_stalls, 0);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k != 'fence'"), "3");
}

TEST(GroupCommit, ARunFromALeadersCallbackHandsTheQueueBackToTheWriterThread) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);
  // Were the leadership not handed back, the Run below would wait for this.
  writer.SetLeaderStallTimeoutForTesting(absl::Seconds(20));
  absl::Notification release;
  absl::Status inner = absl::UnknownError("not run");
  std::thread leader = LeadHeld(writer, release, [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    inner = writer.Run(Insert("from the callback"));
  });
  absl::Notification queued_done;
  writer.Submit(Insert("queued"), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    queued_done.Notify();
  });
  WaitForQueue(writer, 1);
  release.Notify();
  leader.join();
  EXPECT_TRUE(inner.ok()) << inner;
  ASSERT_TRUE(queued_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(writer.stats().leader_stalls, 0);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k != 'fence'"), "3");
}

TEST(GroupCommit, WritesFromACallbackAnsweredOnItsCallersThreadGoToTheWriter) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 64);
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id outer;
  std::thread::id inner;
  absl::Status inner_result = absl::UnknownError("not run");
  {
    CommitOnThisThread here;
    writer.Submit(InsertOn("outer", &outer), [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      // Not under the scope any more: the writer thread takes this one.
      absl::Notification inner_done;
      writer.Submit(InsertOn("inner", &inner), [&](absl::Status s) {
        inner_result = s;
        inner_done.Notify();
      });
      inner_done.WaitForNotification();
    });
  }
  EXPECT_EQ(outer, me);
  EXPECT_TRUE(inner_result.ok()) << inner_result;
  EXPECT_NE(inner, me);
  // The callback waited on its leader's thread: the writer thread took the
  // queue from it.
  EXPECT_EQ(writer.stats().leader_stalls, 1);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k IN ('outer', 'inner')"),
            "2");
}

TEST(GroupCommit, TheWriterStopsOnlyAfterACommitOnACallersThreadEnded) {
  std::string path = FreshDbPath();
  auto writer = std::make_unique<GroupCommitWriter>(OpenTable(path), 64);
  absl::Notification entered;
  absl::Notification release;
  absl::Status result = absl::UnknownError("not run");
  std::thread caller([&] {
    CommitOnThisThread here;
    result = writer->Run([&](Connection& conn) {
      entered.Notify();
      release.WaitForNotification();
      return Insert("last")(conn);
    });
  });
  entered.WaitForNotification();
  absl::Notification stopped;
  std::thread stopper([&] {
    writer.reset();  // waits for the caller's commit, then stops
    stopped.Notify();
  });
  release.Notify();
  caller.join();
  stopper.join();
  EXPECT_TRUE(stopped.HasBeenNotified());
  EXPECT_TRUE(result.ok()) << result;
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k = 'last'"), "1");
}

TEST(GroupCommit, ATransactionSQLiteRolledBackFailsTheWholeGroupAsUnavailable) {
  std::string path = FreshDbPath();
  std::atomic<int> rollbacks{0};
  GroupCommitWriter writer(OpenTable(path), 64, /*completion_threads=*/2,
                           /*observer=*/nullptr, [&] { ++rollbacks; });
  absl::Notification release;
  std::thread blocker = HoldTheWriter(writer, release);
  absl::Status results[2];
  std::vector<std::thread> callers;
  callers.emplace_back([&] { results[0] = writer.Run(Insert("kept?")); });
  WaitForQueue(writer, 1);
  // Stands for SQLITE_FULL or an I/O error, after which SQLite has rolled
  // the transaction back although the op itself saw nothing wrong.
  callers.emplace_back([&] {
    results[1] =
        writer.Run([](Connection& conn) { return conn.Exec("ROLLBACK"); });
  });
  WaitForQueue(writer, 2);
  release.Notify();
  blocker.join();
  for (std::thread& t : callers) t.join();

  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(ReasonOf(s), "STORE_UNAVAILABLE");
  }
  EXPECT_EQ(rollbacks.load(), 1);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM t WHERE k = 'kept?'"), "0");
}

TEST(GroupCommit, GroupSizeOneCommitsEveryOperationAlone) {
  std::string path = FreshDbPath();
  GroupCommitWriter writer(OpenTable(path), 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      EXPECT_TRUE(writer.Run(Insert("k" + std::to_string(i))).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(writer.stats().groups, 8);
}

TEST(GroupCommit, ManyConcurrentCallersShareGroupsAndAllCommit) {
  std::string path = FreshDbPath();
  auto store = testing::OpenOrDie(path);
  constexpr int kThreads = 32, kPerThread = 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        AgentRegistration r;
        r.agent_id = "agent-" + std::to_string(t) + "-" + std::to_string(i);
        r.cli = "other";
        r.now_ms = 1;
        if (!store->agents().RegisterAgent(r).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->agents().ListAgents()->size(),
            size_t{kThreads * kPerThread});
  GroupCommitWriter::Stats stats = store->write_stats();
  EXPECT_EQ(stats.ops, kThreads * kPerThread);
  EXPECT_LT(stats.groups, stats.ops);
}

TEST(GroupCommit, ConcurrentReservationsOfOneVersionHaveExactlyOneWinner) {
  auto store = testing::OpenOrDie(FreshDbPath());
  RoleReservation first;
  first.role_key_wire = "rk2.x";
  first.project_id = "prj";
  first.role_kind = "cto";
  ASSERT_TRUE(store->roles().ReserveRole(first).ok());
  constexpr int kThreads = 16;
  std::atomic<int> applied{0}, stale{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RoleReservation r = first;
      r.expected_version = 0;
      r.expected_epoch = 0;
      r.patch.holder_agent_id = "agent-" + std::to_string(t);
      absl::StatusOr<RoleWrite> w = store->roles().ReserveRole(r);
      ASSERT_TRUE(w.ok());
      if (w->outcome == RoleOutcome::kApplied) ++applied;
      if (w->outcome == RoleOutcome::kStaleVersion) ++stale;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(applied.load(), 1);
  EXPECT_EQ(stale.load(), kThreads - 1);
  EXPECT_EQ(store->roles().GetRole("rk2.x")->epoch, 1);
}

}  // namespace
}  // namespace hub::storage
