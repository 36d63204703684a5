// Several hubs' groups over one PostgreSQL database, whose callers come in
// opposite orders: reserves in two projects, publishes to two agents, role
// changes and reservation changes whose counters are bumped at COMMIT. The
// writer's order keys make each group take those locks in one order, so
// there is no deadlock to break (none replayed); and were there one, no
// caller would hear of it (pg_group_commit_test). (On SQLite the same load
// runs through one store.)
#include <atomic>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::LeadReservation;
using testing::StoreTest;

constexpr int64_t kNow = 1'700'000'000'000;

// Two hubs (stores) over PostgreSQL's one database; SQLite's one store.
class Contention : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    hubs_ = {&store()};
    if (postgres()) {
      other_ = Open();
      ASSERT_NE(other_, nullptr);
      hubs_.push_back(other_.get());
    }
  }
  void TearDown() override {
    other_.reset();
    StoreTest::TearDown();
  }
  // Runs body(t, its hub) on `n` threads that start together, the hubs
  // taken in turn, and joins them.
  void AtOnce(int n, const std::function<void(int, Store&)>& body) {
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < n) std::this_thread::yield();
        body(t, *hubs_[t % hubs_.size()]);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  // Every group took its locks in key order: no deadlock to replay.
  void ExpectNoReplays() {
    for (Store* hub : hubs_) {
      const WriteStats stats = hub->write_stats();
      std::cout << "groups " << stats.groups << ", replays " << stats.replays
                << ", lock retries " << stats.lock_retries << "\n";
      EXPECT_EQ(stats.replays, 0);
    }
  }

  std::unique_ptr<Store> other_;
  std::vector<Store*> hubs_;
};
HUB_STORE_TEST_SUITE(Contention);

TEST_P(Contention, GroupsOfTwoHubsLockingInOppositeOrdersNeverFailACaller) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 60;
  for (int t = 0; t < kThreads; ++t) {
    AgentRegistration r;
    r.agent_id = absl::StrCat("agent-", t);
    r.cli = "claude";
    r.now_ms = kNow;
    r.lease_ttl_ms = 600'000;
    ASSERT_TRUE(store().agents().RegisterAgent(r).ok());
  }
  std::atomic<int> failures{0};
  AtOnce(kThreads, [&](int t, Store& hub) {
    const std::string agent = absl::StrCat("agent-", t);
    auto fail = [&](const absl::Status& s, const char* what) {
      ADD_FAILURE() << what << " on thread " << t << ": " << s;
      failures.fetch_add(1);
    };
    for (int i = 0; i < kRounds && failures.load() == 0; ++i) {
      // Odd threads go through the projects the other way round, and
      // every other round writes a role change (a second counter at
      // COMMIT) between them.
      for (int p = 0; p < 2; ++p) {
        ReservationRequest r;
        r.reservation_id = NewUuidV7();
        r.project_id = absl::StrCat("prj_", (p + t) % 2);
        r.agent_id = agent;
        r.exclusive = true;
        r.patterns = {absl::StrCat("t", t, "/r", i, "/p", p)};
        r.reason = "editing";
        r.now_ms = kNow;
        r.ttl_ms = 60'000;
        absl::StatusOr<ReservationOutcome> out = hub.reservations().Reserve(r);
        if (!out.ok()) return fail(out.status(), "reserve");
        if (!out->granted.has_value()) {
          return fail(absl::OkStatus(), "reserve refused");
        }
        if ((i + p) % 2 == 0) {
          RoleReservation role = LeadReservation();
          role.role_key_wire = absl::StrCat("rk2.lead-", t);
          role.scope_id = absl::StrCat("scp_", t);
          role.patch.holder_agent_id = agent;
          absl::StatusOr<RoleWrite> w = hub.roles().ReserveRole(role);
          if (!w.ok()) return fail(w.status(), "reserve role");
        }
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  ExpectNoReplays();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_reservations"),
            absl::StrCat(kThreads * kRounds * 2));
}

TEST_P(Contention, PublishesOfTwoHubsToTwoAgentsInOppositeOrdersNeverFail) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 100;
  std::atomic<int> failures{0};
  AtOnce(kThreads, [&](int t, Store& hub) {
    for (int i = 0; i < kRounds && failures.load() == 0; ++i) {
      // Odd threads publish to b, then a; even ones to a, then b. The
      // inbox limit makes each publish lock its recipient's count.
      for (int k = 0; k < 2; ++k) {
        const std::string to = (k + t) % 2 == 0 ? "a" : "b";
        absl::StatusOr<std::vector<InboxRecord>> out =
            hub.messages().InsertMessageDelivering(
                testing::TestMessage(absl::StrCat("m-", t, "-", i, "-", k)),
                {to}, {}, kNow, /*max_pending_per_inbox=*/100'000);
        if (!out.ok()) {
          ADD_FAILURE() << "publish on thread " << t << ": " << out.status();
          failures.fetch_add(1);
          return;
        }
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  ExpectNoReplays();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM message_inbox"),
            absl::StrCat(kThreads * kRounds * 2));
}

}  // namespace
}  // namespace hub::storage
