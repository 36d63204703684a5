// RoleChangeFollower with RoleRegistry's kChangeLog publication, on a real
// PostgreSQL database that two "hubs" (a store, a registry and a follower
// each) share: watchers of each see every change made through either, each
// version once, in order; a hole left by pruning is reported and the roles
// read again; Stop ends publication.
#include "registry/role_change_follower.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "registry/clock.h"
#include "registry/role_registry.h"
#include "status/status.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_database.h"

namespace hub {
namespace {

using storage::RoleChange;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kScope[] = "scp_CCCCCCCCCCCCCCCCCCCCCC";
constexpr absl::Duration kPatience = absl::Seconds(30);

RoleKeyRef Cto() {
  RoleKeyRef ref;
  ref.key = RoleKeyInput{kProject, "cto", std::nullopt};
  return ref;
}

RoleKeyRef Lead() {
  RoleKeyRef ref;
  ref.key = RoleKeyInput{kProject, "lead", std::string(kScope)};
  return ref;
}

std::string WireOf(const RoleKeyRef& ref) { return ResolveRoleKey(ref)->wire; }

// What a watcher received, and a way to wait for it (a CondVar, which
// ThreadSanitizer's shim sees: tools/tsan/README.md).
class Seen {
 public:
  void Add(const RoleEvent& e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
    changed_.SignalAll();
  }
  // Waits until `n` events arrived (true) or kPatience passes.
  bool WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + kPatience;
    while (events_.size() < n) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return events_.size() >= n;
  }
  std::vector<RoleEvent> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::vector<RoleEvent> events_ ABSL_GUARDED_BY(mu_);
};

// One hub: its own store over the shared database, a registry publishing
// from the change log, a follower woken by the registry's commits (and its
// poll: no hints between these hubs). The follower is declared last: it
// goes first, while the registry it publishes into still exists.
struct Hub {
  std::unique_ptr<storage::pg::PostgresStore> store;
  std::unique_ptr<RoleRegistry> roles;
  std::unique_ptr<RoleChangeFollower> follower;
};

// A follower of a store of its own that reads only when kicked, publishing
// into `seen`, with what it reports kept. The follower is declared last, so
// it goes first.
struct KickedFollower {
  std::unique_ptr<storage::pg::PostgresStore> store;
  Seen seen;
  absl::Mutex mu;
  std::vector<absl::Status> reported ABSL_GUARDED_BY(mu);
  std::unique_ptr<RoleChangeFollower> follower;

  std::vector<absl::Status> Reported() {
    absl::MutexLock lock(&mu);
    return reported;
  }
};

class RoleChangeFollowerTest : public storage::pg::testing::PgDatabaseTest {
 protected:
  std::unique_ptr<storage::pg::PostgresStore> OpenStore() {
    storage::pg::PostgresStoreOptions o;
    o.conninfo = server_->ConnInfo(database_);
    absl::StatusOr<std::unique_ptr<storage::pg::PostgresStore>> s =
        storage::pg::PostgresStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::unique_ptr<Hub> StartHub(RoleChangeFollowerOptions options = {}) {
    auto hub = std::make_unique<Hub>();
    hub->store = OpenStore();
    if (hub->store == nullptr) return nullptr;
    options.on_error = [this](const absl::Status& s) {
      absl::MutexLock lock(&errors_mu_);
      errors_.push_back(s);
    };
    hub->follower =
        std::make_unique<RoleChangeFollower>(&hub->store->roles(), options);
    RoleRegistryOptions ro;
    ro.publication = RolePublication::kChangeLog;
    RoleChangeFollower* follower = hub->follower.get();
    ro.on_role_committed = [follower] { follower->Kick(); };
    hub->roles =
        std::make_unique<RoleRegistry>(&hub->store->roles(), &clock_, ro);
    RoleRegistry* roles = hub->roles.get();
    absl::Status started = follower->Start(
        [roles](const RoleChange& change) { roles->PublishLogged(change); });
    EXPECT_TRUE(started.ok()) << started;
    return hub;
  }

  std::unique_ptr<KickedFollower> StartKickedFollower() {
    auto f = std::make_unique<KickedFollower>();
    f->store = OpenStore();
    if (f->store == nullptr) return nullptr;
    RoleChangeFollowerOptions kicked;
    kicked.poll_interval = absl::Hours(1);
    kicked.prune_interval = absl::ZeroDuration();
    KickedFollower* raw = f.get();
    kicked.on_error = [raw](const absl::Status& s) {
      absl::MutexLock lock(&raw->mu);
      raw->reported.push_back(s);
    };
    f->follower =
        std::make_unique<RoleChangeFollower>(&f->store->roles(), kicked);
    absl::Status started = f->follower->Start([raw](const RoleChange& c) {
      RoleEvent e;
      e.kind = c.kind == RoleChange::Kind::kRemoved ? RoleChangeKind::kRemoved
                                                    : RoleChangeKind::kUpdated;
      e.role = c.role;
      raw->seen.Add(e);
    });
    EXPECT_TRUE(started.ok()) << started;
    return f;
  }

  // Hubs a_ and b_; false when one did not start.
  bool StartTwoHubs() {
    a_ = StartHub();
    b_ = StartHub();
    return a_ != nullptr && b_ != nullptr;
  }

  // A watch of every role on `hub` recording into `seen`.
  std::unique_ptr<RoleWatch> WatchAll(Hub& hub, Seen* seen) {
    absl::StatusOr<RoleWatchStart> start = hub.roles->Watch(
        RoleWatchFilter{}, [seen](const RoleEvent& e) { seen->Add(e); });
    EXPECT_TRUE(start.ok()) << start.status();
    return start.ok() ? std::move(start->watch) : nullptr;
  }

  std::vector<absl::Status> errors() {
    absl::MutexLock lock(&errors_mu_);
    return errors_;
  }

  FakeClock clock_;
  absl::Mutex errors_mu_;
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(errors_mu_);
  std::unique_ptr<Hub> a_;
  std::unique_ptr<Hub> b_;
};

TEST_F(RoleChangeFollowerTest,
       AWatcherOnOneHubSeesEveryChangeMadeThroughTheOther) {
  ASSERT_TRUE(StartTwoHubs());
  Hub* a = a_.get();
  Hub* b = b_.get();
  Seen seen;
  std::unique_ptr<RoleWatch> watch = WatchAll(*a, &seen);
  ReserveInput reserve;
  reserve.role = Cto();
  absl::StatusOr<ReserveResult> created = b->roles->Reserve(reserve);
  ASSERT_TRUE(created.ok()) << created.status();
  CasInput cas;
  cas.role = Cto();
  cas.expected_version = 0;
  cas.expected_epoch = 0;
  cas.expected_activation_seq = 0;
  cas.expected_activation_id = std::optional<std::string>();
  cas.patch.last_reason = "via b";
  ASSERT_TRUE(b->roles->CompareAndSet(cas).ok());
  reserve.role = Lead();
  ASSERT_TRUE(b->roles->Reserve(reserve).ok());
  ScopeCloseInput close;
  close.role = Lead();
  close.closed_by = "ops";
  ASSERT_TRUE(b->roles->CloseScope(close).ok());

  ASSERT_TRUE(seen.WaitFor(4));
  std::vector<RoleEvent> got = seen.events();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].kind, RoleChangeKind::kCreated);
  EXPECT_EQ(got[0].role.role_key_wire, WireOf(Cto()));
  EXPECT_EQ(got[1].kind, RoleChangeKind::kUpdated);
  EXPECT_EQ(got[1].role.version, 1);
  EXPECT_EQ(got[1].role.last_reason, "via b");
  EXPECT_GT(got[1].changed_at_ms, 0);  // when it committed
  EXPECT_EQ(got[2].kind, RoleChangeKind::kCreated);
  EXPECT_EQ(got[2].role.role_key_wire, WireOf(Lead()));
  EXPECT_EQ(got[3].kind, RoleChangeKind::kRemoved);
  EXPECT_EQ(got[3].role.role_key_wire, WireOf(Lead()));
  EXPECT_TRUE(errors().empty());
}

// Writers on both hubs compare-and-set two roles as fast as they can; a
// watcher on each hub gets every committed version of each role exactly
// once, in order: no gap, no duplicate.
TEST_F(RoleChangeFollowerTest, WatchersOnBothHubsSeeEveryVersionOnceInOrder) {
  ASSERT_TRUE(StartTwoHubs());
  Hub* a = a_.get();
  Hub* b = b_.get();
  Seen seen_a;
  Seen seen_b;
  std::unique_ptr<RoleWatch> watch_a = WatchAll(*a, &seen_a);
  std::unique_ptr<RoleWatch> watch_b = WatchAll(*b, &seen_b);
  std::vector<Hub*> hubs = {a, b};
  for (const RoleKeyRef& role : {Cto(), Lead()}) {
    ReserveInput reserve;
    reserve.role = role;
    ASSERT_TRUE(a->roles->Reserve(reserve).ok());
  }
  constexpr int kWriters = 6;
  constexpr int kAttempts = 30;
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      Hub& hub = *hubs[t % 2];
      const RoleKeyRef role = t % 3 == 0 ? Lead() : Cto();
      for (int i = 0; i < kAttempts; ++i) {
        absl::StatusOr<RoleRecord> row = hub.roles->Get(role);
        if (!row.ok()) continue;
        CasInput cas;
        cas.role = role;
        cas.expected_version = row->version;
        cas.expected_epoch = row->epoch;
        cas.expected_activation_seq = row->activation_seq;
        cas.expected_activation_id = row->activation_id;
        cas.patch.retry_count = t * 1000 + i;
        (void)hub.roles->CompareAndSet(cas);
      }
    });
  }
  for (std::thread& w : writers) w.join();
  const int64_t cto = a->roles->Get(Cto())->version;
  const int64_t lead = a->roles->Get(Lead())->version;
  const size_t total = static_cast<size_t>(cto + 1 + lead + 1);
  for (Seen* seen : {&seen_a, &seen_b}) {
    ASSERT_TRUE(seen->WaitFor(total));
    std::map<std::string, int64_t> next = {{WireOf(Cto()), 0},
                                           {WireOf(Lead()), 0}};
    std::vector<RoleEvent> got = seen->events();
    EXPECT_EQ(got.size(), total);
    for (const RoleEvent& e : got) {
      int64_t& want = next[e.role.role_key_wire];
      EXPECT_EQ(e.role.version, want) << e.role.role_key_wire;
      want = e.role.version + 1;
    }
    EXPECT_EQ(next[WireOf(Cto())], cto + 1);
    EXPECT_EQ(next[WireOf(Lead())], lead + 1);
  }
}

TEST_F(RoleChangeFollowerTest, OwnWritesPublishNothingWithoutTheFollower) {
  std::unique_ptr<storage::pg::PostgresStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::atomic<int> committed{0};
  RoleRegistryOptions ro;
  ro.publication = RolePublication::kChangeLog;
  ro.on_role_committed = [&committed] { ++committed; };
  RoleRegistry roles(&store->roles(), &clock_, ro);
  Seen seen;
  absl::StatusOr<RoleWatchStart> start = roles.Watch(
      RoleWatchFilter{}, [&seen](const RoleEvent& e) { seen.Add(e); });
  ASSERT_TRUE(start.ok());
  ReserveInput reserve;
  reserve.role = Cto();
  ASSERT_TRUE(roles.Reserve(reserve).ok());
  ASSERT_TRUE(roles.Reserve(reserve).ok());
  EXPECT_EQ(committed.load(), 2);
  EXPECT_TRUE(seen.events().empty());
}

// A follower that has not read for longer than the log keeps changes finds
// a hole where they were: it says so and publishes every role as it is now.
TEST_F(RoleChangeFollowerTest,
       ChangesPrunedBeforeTheyWereReadAreReplacedByTheRoles) {
  std::unique_ptr<KickedFollower> f = StartKickedFollower();
  ASSERT_NE(f, nullptr);
  std::unique_ptr<Hub> writer = StartHub();
  ASSERT_NE(writer, nullptr);
  for (int i = 0; i < 3; ++i) {
    ReserveInput reserve;
    reserve.role = Cto();
    ASSERT_TRUE(writer->roles->Reserve(reserve).ok());
  }
  std::unique_ptr<storage::pg::Connection> sql = Connect();
  ASSERT_NE(sql, nullptr);
  ASSERT_TRUE(sql->Exec("UPDATE hub_role_changes SET written_at_ms = 0").ok());
  ASSERT_EQ(f->store->roles().PruneRoleChanges(60'000, 100).value_or(-1), 3);
  const int64_t head = *f->store->roles().RoleChangeHead();
  f->follower->Kick();
  ASSERT_TRUE(f->seen.WaitFor(1));
  f->follower->Stop();
  std::vector<RoleEvent> got = f->seen.events();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].role.role_key_wire, WireOf(Cto()));
  EXPECT_EQ(got[0].role.version, 2);
  EXPECT_EQ(f->follower->cursor(), head);
  std::vector<absl::Status> reported = f->Reported();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReasonOf(reported[0]), "ROLE_CHANGES_MISSED");
}

// A database whose log went back (restored, or a standby promoted without
// its last commits) would hand out seqs the follower has passed: it says so
// and publishes every role as it is now, then follows the new seqs.
TEST_F(RoleChangeFollowerTest,
       AHeadThatWentBackIsReportedAndTheRolesReadAgain) {
  std::unique_ptr<Hub> writer = StartHub();
  ASSERT_NE(writer, nullptr);
  ReserveInput reserve;
  reserve.role = Cto();
  ASSERT_TRUE(writer->roles->Reserve(reserve).ok());
  ASSERT_TRUE(writer->roles->Reserve(reserve).ok());
  std::unique_ptr<KickedFollower> f = StartKickedFollower();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->follower->cursor(), 2);
  writer->follower->Stop();  // it would report the same
  std::unique_ptr<storage::pg::Connection> sql = Connect();
  ASSERT_NE(sql, nullptr);
  ASSERT_TRUE(sql->Exec("DELETE FROM hub_role_changes; "
                        "UPDATE hub_role_change_counter SET seq = 0")
                  .ok());
  f->follower->Kick();
  ASSERT_TRUE(f->seen.WaitFor(1));
  EXPECT_EQ(f->seen.events()[0].role.version, 1);
  ASSERT_TRUE(writer->roles->Reserve(reserve).ok());  // seq 1 again
  f->follower->Kick();
  ASSERT_TRUE(f->seen.WaitFor(2));
  f->follower->Stop();
  EXPECT_EQ(f->seen.events()[1].role.version, 2);
  EXPECT_EQ(f->follower->cursor(), 1);
  std::vector<absl::Status> reported = f->Reported();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(ReasonOf(reported[0]), "ROLE_CHANGES_MISSED");
}

TEST_F(RoleChangeFollowerTest, AfterStopNothingIsPublishedAndKickIsHarmless) {
  ASSERT_TRUE(StartTwoHubs());
  Hub* a = a_.get();
  Hub* b = b_.get();
  Seen seen;
  std::unique_ptr<RoleWatch> watch = WatchAll(*a, &seen);
  a->follower->Stop();
  a->follower->Kick();
  ReserveInput reserve;
  reserve.role = Cto();
  ASSERT_TRUE(b->roles->Reserve(reserve).ok());
  // b's own watcher sees it; a's never will.
  Seen seen_b;
  std::unique_ptr<RoleWatch> watch_b = WatchAll(*b, &seen_b);
  ASSERT_TRUE(b->roles->Reserve(reserve).ok());
  ASSERT_TRUE(seen_b.WaitFor(1));
  EXPECT_TRUE(seen.events().empty());
}

}  // namespace
}  // namespace hub
