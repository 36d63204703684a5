// ConsoleHints over a real PostgreSQL server (the test starts its own): a
// hub's changes go out as NOTIFY hub_console after the fact, another hub's
// console takes them and ignores its own, and a console whose listening
// connection was lost tells its pages to load their snapshots again.
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/console/console_hints.h"
#include "nlohmann/json.hpp"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_listener.h"
#include "storage/pg/pg_signals.h"
#include "storage/pg/pg_test_server.h"

namespace hub::console {
namespace {

using nlohmann::json;
using storage::pg::Connection;

// Waits until `done` holds (the listener connects in the background).
template <typename F>
bool Eventually(F done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Every notification on the console's channel, from the time it listens.
class HintCollector {
 public:
  explicit HintCollector(const std::string& conninfo) {
    storage::pg::ListenerOptions listen;
    listen.conninfo = conninfo;
    listen.channels = {kConsoleChannel};
    listen.on_resync = [this] {
      absl::MutexLock lock(&mu_);
      listening_ = true;
    };
    listen.on_notify = [this](const storage::pg::Notification& n) {
      absl::MutexLock lock(&mu_);
      payloads_.push_back(n.payload);
    };
    listener_ = std::make_unique<storage::pg::Listener>(std::move(listen));
  }
  ~HintCollector() { listener_->Stop(); }

  bool listening() {
    absl::MutexLock lock(&mu_);
    return listening_;
  }
  std::vector<std::string> payloads() {
    absl::MutexLock lock(&mu_);
    return payloads_;
  }

 private:
  absl::Mutex mu_;
  bool listening_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> payloads_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<storage::pg::Listener> listener_;
};

class ConsoleHintsPgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = storage::pg::testing::PgTestServer::Create();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    signals_ = new storage::pg::PgSignals(server_->ConnInfo());
  }
  static void TearDownTestSuite() {
    delete signals_;
    signals_ = nullptr;
    delete server_;
    server_ = nullptr;
  }

  ConsoleHintsOptions Options(const std::string& hub_id) {
    ConsoleHintsOptions o;
    o.signals = signals_;
    o.hub_instance_id = hub_id;
    return o;
  }

  // The next change of `model`'s feed after `after`, waiting for it.
  static ConsoleBatch Next(ConsoleModel& model, int64_t after) {
    return model.feed()->WaitAfter(after, absl::Seconds(30));
  }

  static void Notify(const std::string& payload) {
    auto conn = Connection::Open(server_->ConnInfo());
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE((*conn)
                    ->Run("SELECT pg_notify($1, $2)",
                          {std::string(kConsoleChannel), payload})
                    .ok());
  }

  // The pids of the backends whose LISTEN is in effect (the statement done).
  static std::set<std::string> ListeningPids() {
    std::set<std::string> pids;
    auto conn = Connection::Open(server_->ConnInfo());
    if (!conn.ok()) return pids;
    auto r = (*conn)->Exec(
        "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' "
        "AND state = 'idle'");
    if (!r.ok()) return pids;
    for (int i = 0; i < r->rows(); ++i) pids.insert(std::string(r->Text(i, 0)));
    return pids;
  }
  // Waits for a listening backend that is not one of `before`: the console
  // made after `before` was read. Its pid, or "".
  static std::string NewListener(const std::set<std::string>& before) {
    std::string pid;
    Eventually([&] {
      for (const std::string& p : ListeningPids()) {
        if (before.count(p) == 0) pid = p;
      }
      return !pid.empty();
    });
    return pid;
  }

  static storage::pg::testing::PgTestServer* server_;
  static storage::pg::PgSignals* signals_;
};

storage::pg::testing::PgTestServer* ConsoleHintsPgTest::server_ = nullptr;
storage::pg::PgSignals* ConsoleHintsPgTest::signals_ = nullptr;

TEST_F(ConsoleHintsPgTest, AHubsChangesGoOutAsOneHintNamingTheRows) {
  HintCollector heard(server_->ConnInfo());
  ASSERT_TRUE(Eventually([&] { return heard.listening(); }));

  ConsoleHints sender(nullptr, Options("hub-b"));  // no console of its own
  sender.AgentsChanged({"agent-1", "agent-1"});
  sender.MessagesChanged({"m1"});
  sender.RoleChanged("rk2.x");
  // Every id named once, in however many batches the sender's 20 ms
  // window cut them into (a slow machine, TSan: more than one).
  json all;
  const auto collect = [&] {
    all = {{"a", json::array()}, {"m", json::array()}, {"r", json::array()}};
    for (const std::string& p : heard.payloads()) {
      const json j = json::parse(p);
      EXPECT_EQ(j["h"], "hub-b");
      for (const char* key : {"a", "m", "r"}) {
        if (j.contains(key)) {
          for (const json& id : j[key]) all[key].push_back(id);
        }
      }
    }
    return !all["a"].empty() && !all["m"].empty() && !all["r"].empty();
  };
  ASSERT_TRUE(Eventually(collect));
  EXPECT_EQ(all["a"], json({"agent-1"}));
  EXPECT_EQ(all["m"], json({"m1"}));
  EXPECT_EQ(all["r"], json({"rk2.x"}));
}

TEST_F(ConsoleHintsPgTest, AConsoleTakesOtherHubsHintsAndIgnoresItsOwn) {
  ConsoleModel model(ConsoleSources{});
  const std::set<std::string> before = ListeningPids();
  ConsoleHints hints(&model, Options("hub-a"));
  ASSERT_FALSE(NewListener(before).empty());
  Notify(R"({"h":"hub-a","reset":true})");  // its own
  Notify("not json");
  Notify(R"({"a":["x"]})");  // not a console hint: no hub
  Notify(R"({"h":"hub-b","reset":true})");
  // Notifications of one channel arrive in commit order: once the last is
  // taken, the others were looked at.
  ASSERT_TRUE(Eventually([&] { return hints.received() > 0; }));
  EXPECT_EQ(hints.received(), 1);
  const ConsoleBatch batch = Next(model, 0);
  ASSERT_EQ(batch.changes.size(), 1u);
  EXPECT_EQ(batch.changes[0].kind, "reset");
}

TEST_F(ConsoleHintsPgTest, AfterItsListenerReconnectsTheConsolesPagesReload) {
  ConsoleModel model(ConsoleSources{});
  const std::set<std::string> before = ListeningPids();
  ConsoleHints hints(&model, Options("hub-a"));
  auto conn = Connection::Open(server_->ConnInfo());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const std::string pid = NewListener(before);
  ASSERT_FALSE(pid.empty());
  const int64_t head = model.feed()->head();
  ASSERT_TRUE((*conn)->Run("SELECT pg_terminate_backend($1::int)", {pid}).ok());
  const ConsoleBatch batch = Next(model, head);
  ASSERT_FALSE(batch.changes.empty());
  EXPECT_EQ(batch.changes[0].kind, "reset");
}

// Hub B's hints sender loses its connection (terminated by the server) and
// drops the batch it could not send; it tries again by itself and, once it
// can send, sends a reset in place of what it dropped: hub A's pages load
// their snapshots again without another change.
TEST_F(ConsoleHintsPgTest, HintsASenderCouldNotSendBecomeAResetOnceItCanSend) {
  HintCollector heard(server_->ConnInfo());
  ASSERT_TRUE(Eventually([&] { return heard.listening(); }));
  const auto received = [&](const json& want) {
    for (const std::string& p : heard.payloads()) {
      if (json::parse(p) == want) return true;
    }
    return false;
  };

  ConsoleHintsOptions options = Options("hub-b-lost");
  ConsoleHints sender(nullptr, options);
  sender.AgentsChanged({"agent-1"});
  ASSERT_TRUE(Eventually([&] {
    return received({{"h", "hub-b-lost"}, {"a", json::array({"agent-1"})}});
  }));

  // The server ends the sender's backend (found by its application_name),
  // and the test waits until it is gone.
  auto conn = Connection::Open(server_->ConnInfo());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const std::string name = options.application_name_prefix + "hub-b-lost";
  auto pids = (*conn)->Run(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE application_name = $1",
      {name});
  ASSERT_TRUE(pids.ok()) << pids.status();
  ASSERT_EQ(pids->rows(), 1);
  ASSERT_TRUE(Eventually([&] {
    auto left = (*conn)->Run(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
        {name});
    return left.ok() && left->Text(0, 0) == "0";
  }));

  // This change's hint cannot go out on the dead connection: dropped. No
  // change follows; the sender's retry brings the reset.
  sender.AgentsChanged({"agent-2"});
  ASSERT_TRUE(Eventually([&] { return sender.failed() > 0; }));
  ASSERT_TRUE(Eventually([&] {
    return received({{"h", "hub-b-lost"}, {"reset", true}});
  }));
  EXPECT_FALSE(
      received({{"h", "hub-b-lost"}, {"a", json::array({"agent-2"})}}));
  EXPECT_EQ(sender.failed(), 1);

  // Sending again as before.
  sender.AgentsChanged({"agent-3"});
  ASSERT_TRUE(Eventually([&] {
    return received({{"h", "hub-b-lost"}, {"a", json::array({"agent-3"})}});
  }));
}

}  // namespace
}  // namespace hub::console
