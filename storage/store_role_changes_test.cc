// The role change log on every engine: SQLite has none; on PostgreSQL every
// committed change of a role row is logged, by whichever path made it, in
// commit order with consecutive seqs, including the changes of two hubs
// racing for the same roles, and old changes are pruned.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_conn.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

using testing::CasFrom;
using testing::CtoReservation;
using testing::LeadReservation;
using testing::StoreTest;
using Kind = RoleChange::Kind;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kCto[] = "rk2.cto-key";
constexpr char kLead[] = "rk2.lead-key";

class RoleChangeLog : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    if (!postgres()) return;
    absl::StatusOr<int64_t> head = store().roles().RoleChangeHead();
    ASSERT_TRUE(head.ok()) << head.status();
    start_ = *head;
  }

  // Every change after `after`, read a page of `page` at a time.
  std::vector<RoleChange> ChangesAfter(int64_t after, int64_t page = 1000) {
    std::vector<RoleChange> all;
    for (;;) {
      absl::StatusOr<RoleChangePage> got =
          store().roles().ReadRoleChanges(after, page);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok() || got->changes.empty()) return all;
      EXPECT_EQ(got->head, store().roles().RoleChangeHead().value_or(-1));
      after = got->changes.back().seq;
      all.insert(all.end(), got->changes.begin(), got->changes.end());
    }
  }

  RoleRecord Applied(absl::StatusOr<RoleWrite> w) {
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return RoleRecord();
    EXPECT_EQ(w->outcome, RoleOutcome::kApplied) << RoleOutcomeName(w->outcome);
    return w->role.value_or(RoleRecord());
  }

  int64_t start_ = 0;
};
HUB_STORE_TEST_SUITE(RoleChangeLog);

TEST_P(RoleChangeLog, OnlyPostgresKeepsOneAndSqliteSaysSo) {
  EXPECT_EQ(store().roles().HasRoleChangeLog(), postgres());
  if (postgres()) return;
  for (const absl::Status& s :
       {store().roles().RoleChangeHead().status(),
        store().roles().ReadRoleChanges(0, 10).status(),
        store().roles().PruneRoleChanges(1000, 10).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(ReasonOf(s), "ROLE_CHANGE_LOG_UNSUPPORTED");
  }
}

TEST_P(RoleChangeLog, EveryKindOfRoleWriteIsLoggedInCommitOrder) {
  if (!postgres()) GTEST_SKIP() << "SQLite keeps no role change log";
  std::vector<std::pair<Kind, RoleRecord>> expected;
  RoleRecord cto = Applied(store().roles().ReserveRole(CtoReservation()));
  expected.push_back({Kind::kCreated, cto});
  cto = Applied(store().roles().ReserveRole(CtoReservation()));
  expected.push_back({Kind::kUpdated, cto});
  RoleCas cas = CasFrom(cto);
  cas.patch.holder_agent_id = "agent-a";
  cas.patch.holder_lease_expires_ms = kNow - 1;
  cas.patch.state = RoleState::kElectedProbing;
  cto = Applied(store().roles().CompareAndSetRole(cas));
  expected.push_back({Kind::kUpdated, cto});
  // A refused write changes nothing, so logs nothing.
  absl::StatusOr<RoleWrite> stale = store().roles().CompareAndSetRole(cas);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->outcome, RoleOutcome::kStaleVersion);
  absl::StatusOr<RecoveryResult> recovered = store().roles().RecoverRoles(kNow);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->recovered.size(), 1u);
  expected.push_back({Kind::kUpdated, recovered->recovered[0]});
  RoleRecord lead = Applied(store().roles().ReserveRole(LeadReservation()));
  expected.push_back({Kind::kCreated, lead});
  ScopeClose close;
  close.project_id = "prj_1";
  close.scope_id = "scp_1";
  close.role_key_wire = kLead;
  close.closed_by = "ops";
  close.now_ms = kNow + 2;
  absl::StatusOr<ScopeCloseResult> closed =
      store().roles().CloseLeadScope(close);
  ASSERT_TRUE(closed.ok()) << closed.status();
  expected.push_back({Kind::kRemoved, lead});
  ASSERT_EQ(store().roles().DeleteRole(kCto).value_or(RoleOutcome::kNotFound),
            RoleOutcome::kApplied);
  expected.push_back({Kind::kRemoved, recovered->recovered[0]});

  std::vector<RoleChange> changes = ChangesAfter(start_, 2);
  ASSERT_EQ(changes.size(), expected.size());
  for (size_t i = 0; i < changes.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("change ", i));
    EXPECT_EQ(changes[i].seq, start_ + 1 + static_cast<int64_t>(i));
    EXPECT_EQ(changes[i].kind, expected[i].first);
    const RoleRecord& want = expected[i].second;
    const RoleRecord& got = changes[i].role;
    EXPECT_EQ(got.role_key_wire, want.role_key_wire);
    EXPECT_EQ(got.project_id, want.project_id);
    EXPECT_EQ(got.scope_id, want.scope_id);
    EXPECT_EQ(got.state, want.state);
    EXPECT_EQ(got.holder_agent_id, want.holder_agent_id);
    EXPECT_EQ(got.previous_holder_agent_id, want.previous_holder_agent_id);
    EXPECT_EQ(got.epoch, want.epoch);
    EXPECT_EQ(got.activation_seq, want.activation_seq);
    EXPECT_EQ(got.activation_id, want.activation_id);
    EXPECT_EQ(got.holder_lease_expires_ms, want.holder_lease_expires_ms);
    EXPECT_EQ(got.last_reason, want.last_reason);
    EXPECT_EQ(got.version, want.version);
    EXPECT_GT(changes[i].committed_at_ms, 0);
    if (i > 0) {
      EXPECT_GE(changes[i].committed_at_ms, changes[i - 1].committed_at_ms);
    }
  }
  EXPECT_EQ(store().roles().RoleChangeHead().value_or(-1), changes.back().seq);
}

TEST_P(RoleChangeLog, AnOperatorsSqlIsLoggedAndAFailedWriteLeavesNoHole) {
  if (!postgres()) GTEST_SKIP() << "SQLite keeps no role change log";
  RoleRecord cto = Applied(store().roles().ReserveRole(CtoReservation()));
  // A write the schema refuses (active without a holder) rolls back with its
  // change: the next change takes the next seq.
  RoleCas bad = CasFrom(cto);
  bad.patch.state = RoleState::kActive;
  EXPECT_EQ(ReasonOf(store().roles().CompareAndSetRole(bad).status()),
            "STORE_CONSTRAINT");
  ASSERT_EQ(Exec("UPDATE role_registry SET last_reason = 'by hand', "
                 "version = version + 1"),
            "");
  std::vector<RoleChange> changes = ChangesAfter(start_);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].seq, start_ + 2);
  EXPECT_EQ(changes[1].kind, Kind::kUpdated);
  EXPECT_EQ(changes[1].role.last_reason, "by hand");
  EXPECT_EQ(changes[1].role.version, 1);
}

// seq is taken at COMMIT: a transaction that wrote its row first but
// commits second gets the later seq, so a reader at seq n has every change
// up to n.
TEST_P(RoleChangeLog, SeqFollowsCommitOrderNotWriteOrder) {
  if (!postgres()) GTEST_SKIP() << "SQLite keeps no role change log";
  Applied(store().roles().ReserveRole(CtoReservation()));
  const RoleRecord lead =
      Applied(store().roles().ReserveRole(LeadReservation()));
  absl::StatusOr<std::unique_ptr<pg::Connection>> early =
      pg::Connection::Open(pg_conninfo());
  ASSERT_TRUE(early.ok()) << early.status();
  ASSERT_TRUE((*early)
                  ->Exec("BEGIN; UPDATE role_registry SET version = version "
                         "+ 1, last_reason = 'early' WHERE role_key_wire = "
                         "'rk2.cto-key'")
                  .ok());
  RoleCas cas = CasFrom(lead);
  cas.patch.last_reason = "late";
  Applied(store().roles().CompareAndSetRole(cas));
  const int64_t after_late = *store().roles().RoleChangeHead();
  ASSERT_TRUE((*early)->Exec("COMMIT").ok());
  std::vector<RoleChange> changes = ChangesAfter(start_ + 2);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].role.last_reason, "late");
  EXPECT_EQ(changes[0].seq, after_late);
  EXPECT_EQ(changes[1].role.last_reason, "early");
  EXPECT_EQ(changes[1].seq, after_late + 1);
}

// Two hubs, three writers each, compare-and-setting two roles as fast as
// they can: every applied write is logged once, seqs are consecutive, and
// each role's versions follow one another in seq order.
TEST_P(RoleChangeLog, TwoHubsRacingLogEveryWriteOnceInVersionOrder) {
  if (!postgres()) GTEST_SKIP() << "several hubs share PostgreSQL only";
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  std::vector<Store*> hubs = {&store(), other.get()};
  Applied(store().roles().ReserveRole(CtoReservation()));
  Applied(store().roles().ReserveRole(LeadReservation()));
  constexpr int kWriters = 6;
  constexpr int kAttempts = 40;
  std::atomic<int> applied{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      Store& hub = *hubs[t % 2];
      const std::string wire = t % 3 == 0 ? kLead : kCto;
      for (int i = 0; i < kAttempts; ++i) {
        absl::StatusOr<RoleRecord> row = hub.roles().GetRole(wire);
        if (!row.ok()) continue;
        RoleCas cas = CasFrom(*row);
        cas.patch.last_reason = absl::StrCat("writer-", t, "-", i);
        absl::StatusOr<RoleWrite> w = hub.roles().CompareAndSetRole(cas);
        if (w.ok() && w->outcome == RoleOutcome::kApplied) ++applied;
      }
    });
  }
  for (std::thread& w : writers) w.join();
  std::vector<RoleChange> changes = ChangesAfter(start_ + 2, 7);
  ASSERT_EQ(changes.size(), static_cast<size_t>(applied.load()));
  std::map<std::string, int64_t> version = {{kCto, 0}, {kLead, 0}};
  for (size_t i = 0; i < changes.size(); ++i) {
    EXPECT_EQ(changes[i].seq, start_ + 3 + static_cast<int64_t>(i));
    int64_t& last = version[changes[i].role.role_key_wire];
    EXPECT_EQ(changes[i].role.version, last + 1) << "seq " << changes[i].seq;
    last = changes[i].role.version;
  }
  EXPECT_EQ(version[kCto], store().roles().GetRole(kCto)->version);
  EXPECT_EQ(version[kLead], store().roles().GetRole(kLead)->version);
}

TEST_P(RoleChangeLog, PruningDropsOldChangesOnlyAndLeavesAVisibleHole) {
  if (!postgres()) GTEST_SKIP() << "SQLite keeps no role change log";
  RoleRecord cto = Applied(store().roles().ReserveRole(CtoReservation()));
  for (int i = 0; i < 4; ++i) {
    cto = Applied(store().roles().CompareAndSetRole(CasFrom(cto)));
  }
  // The first three look an hour old.
  ASSERT_EQ(Exec(absl::StrCat("UPDATE hub_role_changes SET written_at_ms = "
                              "written_at_ms - 3600000 WHERE seq <= ",
                              start_ + 3)),
            "");
  absl::StatusOr<int64_t> pruned = store().roles().PruneRoleChanges(60'000, 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 2);  // the limit
  EXPECT_EQ(store().roles().PruneRoleChanges(60'000, 100).value_or(-1), 1);
  EXPECT_EQ(store().roles().PruneRoleChanges(60'000, 100).value_or(-1), 0);
  std::vector<RoleChange> changes = ChangesAfter(start_);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].seq, start_ + 4);  // a reader at start_ sees the hole
  EXPECT_EQ(store().roles().RoleChangeHead().value_or(-1), start_ + 5);
  // Everything old: the log empties, the head stays.
  ASSERT_EQ(Exec("UPDATE hub_role_changes SET written_at_ms = 0"), "");
  EXPECT_EQ(store().roles().PruneRoleChanges(60'000, 100).value_or(-1), 2);
  EXPECT_TRUE(ChangesAfter(0).empty());
  EXPECT_EQ(store().roles().RoleChangeHead().value_or(-1), start_ + 5);
  // An empty page below the head: the reader knows it missed changes.
  absl::StatusOr<RoleChangePage> empty =
      store().roles().ReadRoleChanges(start_, 10);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->changes.empty());
  EXPECT_EQ(empty->head, start_ + 5);
  cto = Applied(store().roles().CompareAndSetRole(CasFrom(cto)));
  changes = ChangesAfter(start_ + 5);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].seq, start_ + 6);
}

TEST_P(RoleChangeLog, APageNeedsALimit) {
  if (!postgres()) GTEST_SKIP() << "SQLite keeps no role change log";
  EXPECT_EQ(ReasonOf(store().roles().ReadRoleChanges(0, 0).status()),
            "REQUEST_INVALID");
  EXPECT_EQ(ReasonOf(store().roles().PruneRoleChanges(1000, 0).status()),
            "REQUEST_INVALID");
}

}  // namespace
}  // namespace hub::storage
