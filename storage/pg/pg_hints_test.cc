// Listener and Notifier against a real PostgreSQL 15 (PgTestServer): hints
// arrive, a burst of hints of one channel coalesces, a hint sent while the
// listener was disconnected is caught by the resync that follows every
// connect, a terminated listener backend reconnects and resyncs, and a
// notifier whose connection died sends its next hint on a new one.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_listener.h"
#include "storage/pg/pg_notifier.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(30);

// What a listener was told, and a way to wait for it (a CondVar, whose
// waits ThreadSanitizer's shim sees: tools/tsan/README.md).
class Heard {
 public:
  void Notified(const Notification& n) {
    absl::MutexLock lock(&mu_);
    notifications_.push_back(n);
    changed_.SignalAll();
  }
  void Resynced(int64_t newest) {
    absl::MutexLock lock(&mu_);
    resyncs_.push_back(newest);
    changed_.SignalAll();
  }
  void Failed() {
    absl::MutexLock lock(&mu_);
    ++errors_;
    changed_.SignalAll();
  }

  // Waits until at least `n` of notifications, resyncs or errors were
  // recorded (true) or kPatience passes (false).
  bool WaitForNotifications(size_t n) { return WaitFor(&notifications_, n); }
  bool WaitForResyncs(size_t n) { return WaitFor(&resyncs_, n); }
  bool WaitForErrors(int n) { return WaitForEither(SIZE_MAX, n); }
  // Waits for `n` notifications or `e` errors, whichever comes first.
  bool WaitForEither(size_t n, int e) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + kPatience;
    while (notifications_.size() < n && errors_ < e) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return notifications_.size() >= n || errors_ >= e;
  }
  int errors() const {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

  std::vector<Notification> notifications() const {
    absl::MutexLock lock(&mu_);
    return notifications_;
  }
  std::vector<int64_t> resyncs() const {
    absl::MutexLock lock(&mu_);
    return resyncs_;
  }

 private:
  template <typename T>
  bool WaitFor(const std::vector<T>* list, size_t n) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + kPatience;
    while (list->size() < n) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return list->size() >= n;
    }
    return true;
  }

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::vector<Notification> notifications_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> resyncs_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
};

class PgHintsTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    sql_ = Connect();
    ASSERT_NE(sql_, nullptr);
    // What the hints stand for: rows a resync reads by cursor.
    ASSERT_TRUE(sql_->Exec("CREATE TABLE facts (n BIGINT PRIMARY KEY)").ok());
  }

  std::string ConnInfo() const { return server_->ConnInfo(database_); }

  // A listener on `channels` whose resync records the newest fact.
  std::unique_ptr<Listener> Listen(std::vector<std::string> channels,
                                   Heard* heard) {
    ListenerOptions o;
    o.conninfo = ConnInfo();
    o.channels = std::move(channels);
    o.on_notify = [heard](const Notification& n) { heard->Notified(n); };
    const std::string conninfo = ConnInfo();
    o.on_resync = [heard, conninfo] {
      absl::StatusOr<std::unique_ptr<Connection>> c =
          Connection::Open(conninfo);
      int64_t newest = -1;
      if (c.ok()) {
        absl::StatusOr<Result> r =
            (*c)->Exec("SELECT COALESCE(max(n), 0) FROM facts");
        if (r.ok()) newest = r->Int(0, 0).value_or(-1);
      }
      heard->Resynced(newest);
    };
    o.on_error = [heard](const absl::Status&) { heard->Failed(); };
    o.min_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(100);
    return std::make_unique<Listener>(std::move(o));
  }

  void Fact(int n) {
    ASSERT_TRUE(
        sql_->Exec(absl::StrCat("INSERT INTO facts VALUES (", n, ")")).ok());
  }
  void NotifyNow(const std::string& channel, const std::string& payload) {
    ASSERT_TRUE(
        sql_->Query("SELECT pg_notify($1, $2)", {channel, payload}).ok());
  }
  // Runs `sql` from the server's maintenance database.
  void Admin(const std::string& sql) {
    absl::StatusOr<std::unique_ptr<Connection>> c =
        Connection::Open(server_->ConnInfo("postgres"));
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<Result> r = (*c)->Exec(sql);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  std::unique_ptr<Connection> sql_;
};

TEST_F(PgHintsTest, AListenerResyncsOnceListeningThenHearsItsChannelsOnly) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"hints", "Other Hints"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  EXPECT_GT(listener->backend_pid(), 0);
  NotifyNow("unheard", "x");
  NotifyNow("hints", "one");
  NotifyNow("Other Hints", "two");
  ASSERT_TRUE(heard.WaitForNotifications(2));
  listener->Stop();
  std::vector<Notification> got = heard.notifications();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].channel, "hints");
  EXPECT_EQ(got[0].payload, "one");
  EXPECT_EQ(got[0].sender_pid, sql_->BackendPid());
  EXPECT_EQ(got[1].channel, "Other Hints");
  EXPECT_EQ(got[1].payload, "two");
  EXPECT_EQ(listener->backend_pid(), 0);
  EXPECT_EQ(listener->connects(), 1);
}

TEST_F(PgHintsTest, ATerminatedListenerBackendReconnectsAndResyncs) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"hints"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  const int first = listener->backend_pid();
  Fact(1);
  ASSERT_TRUE(
      sql_->Exec(absl::StrCat("SELECT pg_terminate_backend(", first, ")"))
          .ok());
  ASSERT_TRUE(heard.WaitForResyncs(2));
  EXPECT_EQ(heard.resyncs()[1], 1);  // the resync reads what is there
  EXPECT_NE(listener->backend_pid(), first);
  EXPECT_EQ(listener->connects(), 2);
  NotifyNow("hints", "after");
  ASSERT_TRUE(heard.WaitForNotifications(1));
  EXPECT_EQ(heard.notifications()[0].payload, "after");
}

// The database refuses connections while the listener is cut off, so the
// fact and its hint certainly fall between two connections: the hint is
// lost, and the resync after the reconnect finds the fact.
TEST_F(PgHintsTest, AHintSentWhileDisconnectedIsCaughtByTheResync) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"hints"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  EXPECT_EQ(heard.resyncs()[0], 0);
  Admin(absl::StrCat("ALTER DATABASE ", database_,
                     " WITH ALLOW_CONNECTIONS false"));
  Admin(absl::StrCat("SELECT pg_terminate_backend(", listener->backend_pid(),
                     ")"));
  // Refused at least once: it is disconnected now.
  ASSERT_TRUE(heard.WaitForErrors(2));
  Fact(7);
  NotifyNow("hints", "fact 7");  // nobody listens
  Admin(absl::StrCat("ALTER DATABASE ", database_,
                     " WITH ALLOW_CONNECTIONS true"));
  ASSERT_TRUE(heard.WaitForResyncs(2));
  EXPECT_EQ(heard.resyncs()[1], 7);
  listener->Stop();
  EXPECT_TRUE(heard.notifications().empty());
}

TEST_F(PgHintsTest, ABurstOfNotifiesOfOneChannelCoalescesIntoOne) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"a", "b"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  // The sender is held before its second batch until the burst is queued.
  absl::Mutex gate_mu;
  absl::CondVar gate_cv;
  int batches = 0;
  bool open = false;
  NotifierOptions o;
  o.conninfo = ConnInfo();
  o.before_batch = [&] {
    absl::MutexLock lock(&gate_mu);
    ++batches;
    gate_cv.SignalAll();
    while (batches == 2 && !open) gate_cv.Wait(&gate_mu);
  };
  Notifier notifier(o);
  notifier.Notify("a", "first");
  {
    absl::MutexLock lock(&gate_mu);
    while (batches < 2) gate_cv.Wait(&gate_mu);
  }
  for (int i = 0; i < 100; ++i) {
    notifier.Notify("a", absl::StrCat("a", i));
    notifier.Notify("b", absl::StrCat("b", i));
  }
  {
    absl::MutexLock lock(&gate_mu);
    open = true;
    gate_cv.SignalAll();
  }
  ASSERT_TRUE(heard.WaitForNotifications(3));
  notifier.Stop();
  listener->Stop();
  std::vector<Notification> got = heard.notifications();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].channel, "a");
  EXPECT_EQ(got[0].payload, "first");
  // The second batch: one notification per channel, the last payloads.
  std::map<std::string, std::string> last = {{got[1].channel, got[1].payload},
                                             {got[2].channel, got[2].payload}};
  EXPECT_EQ(last,
            (std::map<std::string, std::string>{{"a", "a99"}, {"b", "b99"}}));
  EXPECT_EQ(notifier.sent(), 3);
  EXPECT_EQ(notifier.failures(), 0);
}

// Hints queued within min_interval of a send wait, coalesced; Stop drops
// them (the minute is far longer than the test).
TEST_F(PgHintsTest, HintsWithinTheMinimumIntervalOfASendWaitAndCoalesce) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"a"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  NotifierOptions o;
  o.conninfo = ConnInfo();
  o.min_interval = absl::Minutes(1);
  Notifier notifier(o);
  notifier.Notify("a", "first");
  ASSERT_TRUE(heard.WaitForNotifications(1));
  for (int i = 0; i < 10; ++i) notifier.Notify("a", absl::StrCat(i));
  notifier.Stop();
  EXPECT_EQ(notifier.sent(), 1);
  EXPECT_EQ(heard.notifications().size(), 1u);
}

TEST_F(PgHintsTest,
       ANotifierWhoseConnectionWasTerminatedSendsTheNextHintOnANewOne) {
  Heard heard;
  std::unique_ptr<Listener> listener = Listen({"a"}, &heard);
  ASSERT_TRUE(heard.WaitForResyncs(1));
  NotifierOptions o;
  o.conninfo = ConnInfo();
  o.on_error = [&heard](const absl::Status&) { heard.Failed(); };
  Notifier notifier(o);
  notifier.Notify("a", "1");
  ASSERT_TRUE(heard.WaitForNotifications(1));
  const int notifier_pid = heard.notifications()[0].sender_pid;
  ASSERT_TRUE(sql_->Exec(absl::StrCat("SELECT pg_terminate_backend(",
                                      notifier_pid, ")"))
                  .ok());
  // The next hint meets the dead connection, which only a statement finds
  // out; it goes out on a new one, not dropped (a hint handing a flight to
  // another hub would otherwise wait for that hub's poll).
  notifier.Notify("a", "2");
  ASSERT_TRUE(heard.WaitForNotifications(2));
  std::vector<Notification> got = heard.notifications();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].payload, "2");
  EXPECT_NE(got[1].sender_pid, notifier_pid);
  // The listener may hear a hint before the notifier's thread counted it:
  // the counts are read once that thread is done.
  notifier.Stop();
  EXPECT_EQ(heard.errors(), 0);
  EXPECT_EQ(notifier.failures(), 0);
  EXPECT_EQ(notifier.sent(), 2);
}

}  // namespace
}  // namespace hub::storage::pg
