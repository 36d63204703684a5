// Roles on every engine: reservation (§5.3), compare-and-set (§5.4),
// recovery (§5.7), candidates (§5.6), the schema constraints on role rows,
// and, on PostgreSQL, several hubs racing for one role.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

using testing::CasFrom;
using testing::CtoReservation;
using testing::LeadReservation;
using testing::StoreTest;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kCto[] = "rk2.cto-key";
constexpr char kLead[] = "rk2.lead-key";

RoleFilter ByProject(const std::string& project) {
  RoleFilter f;
  f.project_id = project;
  return f;
}

RoleFilter ByKind(const std::string& kind) {
  RoleFilter f;
  f.role_kind = kind;
  return f;
}

// Every column of `r`, for comparing whole rows with a readable diff.
std::string Columns(const RoleRecord& r) {
  auto text = [](const std::optional<std::string>& v) {
    return v.has_value() ? "'" + *v + "'" : std::string("NULL");
  };
  auto num = [](const std::optional<int64_t>& v) {
    return v.has_value() ? std::to_string(*v) : std::string("NULL");
  };
  return absl::StrCat(
      r.role_key_wire, " ", r.project_id, " ", r.role_kind, " ", r.scope_id,
      " state=", r.state, " holder=", text(r.holder_agent_id),
      " previous=", text(r.previous_holder_agent_id), " epoch=", r.epoch,
      " seq=", r.activation_seq, " activation=", text(r.activation_id),
      " deadline=", num(r.activation_deadline_ms),
      " lease=", num(r.holder_lease_expires_ms),
      " charter=", text(r.charter_version),
      " acked=", num(r.charter_acked_epoch), " retries=", r.retry_count,
      " probe=", num(r.next_probe_ms), " blocked=", text(r.blocked_reason),
      " transition=", r.last_transition_ms, " reason=", r.last_reason,
      " version=", r.version);
}

class RoleStore : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    auto counter = std::make_shared<std::atomic<int>>(0);
    options_.new_id = [counter] { return "act-" + std::to_string(++*counter); };
  }
};
HUB_STORE_TEST_SUITE(RoleStore);

TEST_P(RoleStore, FirstReservationInsertsAtEpochZeroAndRoundTrips) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = kNow + 30'000;
  absl::StatusOr<RoleWrite> w = store().roles().ReserveRole(r);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->epoch, 0);
  EXPECT_EQ(w->role->activation_seq, 0);
  EXPECT_EQ(w->role->version, 0);
  EXPECT_EQ(w->role->state, RoleState::kElectedProbing);
  EXPECT_EQ(w->role->activation_id, "act-1");
  EXPECT_EQ(w->role->last_reason, "role_reserved");
  absl::StatusOr<RoleRecord> read = store().roles().GetRole(kCto);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->holder_agent_id, "agent-a");
  EXPECT_EQ(read->holder_lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(store().roles().ListRoles(ByProject("prj_1"))->size(), 1u);
  EXPECT_EQ(ReasonOf(store().roles().GetRole("rk2.nothing").status()),
            "ROLE_NOT_FOUND");
}

TEST_P(RoleStore, EveryReservationOfAnExistingRowAddsExactlyOneToEpochAndSeq) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<RoleWrite> w = store().roles().ReserveRole(CtoReservation());
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
    EXPECT_EQ(w->role->epoch, i);
    EXPECT_EQ(w->role->activation_seq, i);
    EXPECT_EQ(w->role->version, i);
    EXPECT_EQ(w->role->state, RoleState::kElectable);
  }
}

TEST_P(RoleStore, ReservationWithAnOldVersionOrEpochIsRefusedWithTheLatestRow) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());  // v1 e1

  RoleReservation old_version = CtoReservation();
  old_version.expected_version = 0;
  absl::StatusOr<RoleWrite> w = store().roles().ReserveRole(old_version);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->outcome, RoleOutcome::kStaleVersion);
  EXPECT_EQ(w->role->version, 1);

  RoleReservation old_epoch = CtoReservation();
  old_epoch.expected_epoch = 0;
  EXPECT_EQ(store().roles().ReserveRole(old_epoch)->outcome,
            RoleOutcome::kStaleEpoch);

  RoleReservation skip = CtoReservation();
  skip.next_epoch = 5;
  EXPECT_EQ(store().roles().ReserveRole(skip)->outcome,
            RoleOutcome::kStaleEpoch);
  RoleReservation skip_seq = CtoReservation();
  skip_seq.next_activation_seq = 7;
  EXPECT_EQ(store().roles().ReserveRole(skip_seq)->outcome,
            RoleOutcome::kStaleActivationSeq);
  EXPECT_EQ(store().roles().GetRole(kCto)->epoch, 1);
  EXPECT_EQ(ReasonOf(ToStatus(RoleOutcome::kStaleEpoch)), "STALE_EPOCH");
}

TEST_P(RoleStore, ReservationRecordsThePreviousHolderWhenTheHolderChanges) {
  RoleReservation a = CtoReservation();
  a.patch.holder_agent_id = "agent-a";
  ASSERT_TRUE(store().roles().ReserveRole(a).ok());
  RoleReservation b = CtoReservation();
  b.patch.holder_agent_id = "agent-b";
  absl::StatusOr<RoleWrite> w = store().roles().ReserveRole(b);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->role->previous_holder_agent_id, "agent-a");
  EXPECT_EQ(w->role->activation_id, "act-2");
  RoleReservation release = CtoReservation();
  release.patch.holder_agent_id = Patch<std::string>::Clear();
  release.patch.activation_id = Patch<std::string>::Clear();
  release.patch.last_reason = "holder_lease_expired";
  w = store().roles().ReserveRole(release);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->role->state, RoleState::kElectable);
  EXPECT_FALSE(w->role->holder_agent_id.has_value());
  EXPECT_FALSE(w->role->activation_id.has_value());
  EXPECT_EQ(w->role->previous_holder_agent_id, "agent-b");
  EXPECT_EQ(w->role->last_reason, "holder_lease_expired");
}

// Runs an asynchronous store call and waits for its callback's result.
absl::StatusOr<RoleWrite> Awaited(
    const std::function<void(Callback<RoleWrite>)>& call) {
  // A Notification, not Mutex::Await: the condition of an Await runs inside
  // Abseil, where ThreadSanitizer's shim cannot see it under the lock
  // (tools/tsan/README.md).
  absl::Notification done;
  std::optional<absl::StatusOr<RoleWrite>> result;
  call([&](absl::StatusOr<RoleWrite> w) {
    result = std::move(w);
    done.Notify();
  });
  done.WaitForNotification();
  return std::move(*result);
}

TEST_P(RoleStore, AsyncReservationAndCasAnswerLikeTheBlockingCalls) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  absl::StatusOr<RoleWrite> reserved = Awaited([&](Callback<RoleWrite> done) {
    store().roles().ReserveRoleAsync(r, std::move(done));
  });
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  ASSERT_EQ(reserved->outcome, RoleOutcome::kApplied);
  RoleCas cas = CasFrom(*reserved->role);
  cas.patch.state = RoleState::kActive;
  absl::StatusOr<RoleWrite> set = Awaited([&](Callback<RoleWrite> done) {
    store().roles().CompareAndSetRoleAsync(cas, std::move(done));
  });
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(set->role->state, RoleState::kActive);
  EXPECT_EQ(Awaited([&](Callback<RoleWrite> done) {
              store().roles().CompareAndSetRoleAsync(cas, std::move(done));
            })->outcome,
            RoleOutcome::kStaleVersion);
}

// CASes made at once share groups (on PostgreSQL their statements go out
// together, in one round trip): each answer is still the one the order they
// were made in gives, whether it applied, lost to a neighbour or met no row.
TEST_P(RoleStore, CasesMadeAtOnceAnswerInTheOrderTheyWereMade) {
  constexpr int kRoles = 4;
  std::vector<RoleRecord> rows;
  for (int i = 0; i < kRoles; ++i) {
    RoleReservation r = LeadReservation();
    r.role_key_wire = absl::StrCat("rk2.lead-", i);
    r.scope_id = absl::StrCat("scp_", i);
    r.patch.holder_agent_id = absl::StrCat("agent-", i);
    absl::StatusOr<RoleWrite> w = store().roles().ReserveRole(r);
    ASSERT_TRUE(w.ok()) << w.status();
    rows.push_back(*w->role);
  }
  // Per role: a CAS that applies, then the same CAS again (its version is
  // one behind by then), then one naming the version the first one made
  // but a wrong epoch; and a CAS of a role that does not exist.
  std::vector<RoleCas> cases;
  std::vector<RoleOutcome> expected;
  for (const RoleRecord& row : rows) {
    RoleCas cas = CasFrom(row);
    cas.patch.state = RoleState::kActive;
    cas.patch.last_reason = "activation_acked";
    cases.push_back(cas);
    expected.push_back(RoleOutcome::kApplied);
    cases.push_back(cas);
    expected.push_back(RoleOutcome::kStaleVersion);
    RoleCas wrong_epoch = cas;
    wrong_epoch.expected_version = row.version + 1;
    wrong_epoch.expected_epoch = row.epoch + 1;
    cases.push_back(wrong_epoch);
    expected.push_back(RoleOutcome::kStaleEpoch);
  }
  RoleCas missing = CasFrom(rows[0]);
  missing.role_key_wire = "rk2.lead-missing";
  cases.push_back(missing);
  expected.push_back(RoleOutcome::kNotFound);

  std::vector<absl::StatusOr<RoleWrite>> answers(cases.size(),
                                                 absl::UnknownError(""));
  std::vector<absl::Notification> done(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    store().roles().CompareAndSetRoleAsync(cases[i],
                                           [&, i](absl::StatusOr<RoleWrite> w) {
                                             answers[i] = std::move(w);
                                             done[i].Notify();
                                           });
  }
  for (absl::Notification& n : done) n.WaitForNotification();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("CAS ", i, " of ", cases[i].role_key_wire));
    ASSERT_TRUE(answers[i].ok()) << answers[i].status();
    EXPECT_EQ(answers[i]->outcome, expected[i]);
  }
  for (int i = 0; i < kRoles; ++i) {
    absl::StatusOr<RoleRecord> now =
        store().roles().GetRole(rows[i].role_key_wire);
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_EQ(now->state, RoleState::kActive);
    EXPECT_EQ(now->version, rows[i].version + 1);
    EXPECT_EQ(answers[3 * i]->role->version, rows[i].version + 1);
    // The refusals name the row as the applied CAS left it.
    EXPECT_EQ(answers[3 * i + 1]->role->version, rows[i].version + 1);
    EXPECT_EQ(answers[3 * i + 2]->role->version, rows[i].version + 1);
  }
}

TEST_P(RoleStore, CasWithAllFourGuardsActivatesAndBumpsOnlyTheVersion) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  RoleRecord reserved = *store().roles().ReserveRole(r)->role;
  RoleCas cas = CasFrom(reserved);
  cas.patch.state = RoleState::kActive;
  cas.patch.charter_acked_epoch = reserved.epoch;
  cas.patch.last_reason = "activation_acked";
  absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(cas);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->state, RoleState::kActive);
  EXPECT_EQ(w->role->version, reserved.version + 1);
  EXPECT_EQ(w->role->epoch, reserved.epoch);
  EXPECT_EQ(w->role->activation_seq, reserved.activation_seq);
  EXPECT_EQ(w->role->last_transition_ms, kNow + 1);

  // Replaying the same CAS (old version) is refused.
  EXPECT_EQ(store().roles().CompareAndSetRole(cas)->outcome,
            RoleOutcome::kStaleVersion);
}

TEST_P(RoleStore, CasReportsTheFirstStaleGuardInOrder) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  RoleRecord row = *store().roles().ReserveRole(r)->role;

  RoleCas wrong_epoch = CasFrom(row);
  wrong_epoch.expected_epoch = row.epoch + 1;
  EXPECT_EQ(store().roles().CompareAndSetRole(wrong_epoch)->outcome,
            RoleOutcome::kStaleEpoch);
  RoleCas wrong_seq = CasFrom(row);
  wrong_seq.expected_activation_seq = std::optional<int64_t>(9);
  EXPECT_EQ(store().roles().CompareAndSetRole(wrong_seq)->outcome,
            RoleOutcome::kStaleActivationSeq);
  RoleCas wrong_id = CasFrom(row);
  wrong_id.expected_activation_id = std::optional<std::string>("other");
  EXPECT_EQ(store().roles().CompareAndSetRole(wrong_id)->outcome,
            RoleOutcome::kStaleActivationId);
  RoleCas null_id = CasFrom(row);
  null_id.expected_activation_id = std::optional<std::string>();
  EXPECT_EQ(store().roles().CompareAndSetRole(null_id)->outcome,
            RoleOutcome::kStaleActivationId);
  EXPECT_EQ(store().roles().GetRole(kCto)->version, row.version);
}

TEST_P(RoleStore, CasComparesANullActivationIdNullSafely) {
  RoleRecord row = *store().roles().ReserveRole(CtoReservation())->role;
  ASSERT_FALSE(row.activation_id.has_value());
  RoleCas cas = CasFrom(row);  // expects activation_id NULL
  cas.patch.blocked_reason = "no_candidate";
  absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(cas);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->blocked_reason, "no_candidate");
}

TEST_P(RoleStore, CasWithoutAllFourGuardsIsInvalidAndMissingRowIsNotFound) {
  RoleRecord row = *store().roles().ReserveRole(CtoReservation())->role;
  RoleCas missing_id = CasFrom(row);
  missing_id.expected_activation_id.reset();
  EXPECT_EQ(store().roles().CompareAndSetRole(missing_id)->outcome,
            RoleOutcome::kInvalidCas);
  RoleCas missing_version = CasFrom(row);
  missing_version.expected_version.reset();
  EXPECT_EQ(store().roles().CompareAndSetRole(missing_version)->outcome,
            RoleOutcome::kInvalidCas);
  RoleCas absent = CasFrom(row);
  absent.role_key_wire = "rk2.nothing";
  EXPECT_EQ(store().roles().CompareAndSetRole(absent)->outcome,
            RoleOutcome::kNotFound);
}

TEST_P(RoleStore, CasPatchKeepsAbsentFieldsAndClearsExplicitNulls) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.activation_deadline_ms = kNow + 45'000;
  r.patch.charter_version = "charter-1";
  r.patch.retry_count = 2;
  RoleRecord row = *store().roles().ReserveRole(r)->role;
  RoleCas cas = CasFrom(row);
  cas.patch.activation_deadline_ms = Patch<int64_t>::Clear();
  cas.patch.retry_count = Patch<int64_t>::Clear();  // NOT NULL: keeps
  cas.patch.last_reason = Patch<std::string>::Clear();
  absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(cas);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_FALSE(w->role->activation_deadline_ms.has_value());
  EXPECT_EQ(w->role->charter_version, "charter-1");
  EXPECT_EQ(w->role->retry_count, 2);
  EXPECT_EQ(w->role->last_reason, "role_reserved");
}

TEST_P(RoleStore, CasWritesEveryColumnItSetsAndClearsEveryNullableOne) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  RoleRecord row = *store().roles().ReserveRole(r)->role;
  RoleCas set = CasFrom(row);
  set.patch.state = RoleState::kActive;
  set.patch.holder_agent_id = "agent-b";
  set.patch.previous_holder_agent_id = "agent-a";
  set.patch.activation_id = "act-set";
  set.patch.activation_deadline_ms = kNow + 1;
  set.patch.holder_lease_expires_ms = kNow + 2;
  set.patch.charter_version = "charter-9";
  set.patch.charter_acked_epoch = row.epoch;
  set.patch.retry_count = 7;
  set.patch.next_probe_ms = kNow + 3;
  set.patch.blocked_reason = "blocked";
  set.patch.last_transition_ms = kNow + 4;
  set.patch.last_reason = "reason-set";
  absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(set);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  RoleRecord want = row;
  want.state = RoleState::kActive;
  want.holder_agent_id = "agent-b";
  want.previous_holder_agent_id = "agent-a";
  want.activation_id = "act-set";
  want.activation_deadline_ms = kNow + 1;
  want.holder_lease_expires_ms = kNow + 2;
  want.charter_version = "charter-9";
  want.charter_acked_epoch = row.epoch;
  want.retry_count = 7;
  want.next_probe_ms = kNow + 3;
  want.blocked_reason = "blocked";
  want.last_transition_ms = kNow + 4;
  want.last_reason = "reason-set";
  want.version = row.version + 1;
  EXPECT_EQ(Columns(*w->role), Columns(want));
  EXPECT_EQ(Columns(*store().roles().GetRole(kCto)), Columns(want));

  RoleCas clear = CasFrom(want);
  clear.patch.state = Patch<RoleState>::Clear();  // NOT NULL: keeps
  clear.patch.previous_holder_agent_id = Patch<std::string>::Clear();
  clear.patch.activation_deadline_ms = Patch<int64_t>::Clear();
  clear.patch.holder_lease_expires_ms = Patch<int64_t>::Clear();
  clear.patch.charter_version = Patch<std::string>::Clear();
  clear.patch.charter_acked_epoch = Patch<int64_t>::Clear();
  clear.patch.retry_count = Patch<int64_t>::Clear();  // NOT NULL: keeps
  clear.patch.next_probe_ms = Patch<int64_t>::Clear();
  clear.patch.blocked_reason = Patch<std::string>::Clear();
  clear.patch.last_reason = Patch<std::string>::Clear();  // NOT NULL: keeps
  clear.now_ms = kNow + 5;
  w = store().roles().CompareAndSetRole(clear);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  RoleRecord cleared = want;
  cleared.previous_holder_agent_id.reset();
  cleared.activation_deadline_ms.reset();
  cleared.holder_lease_expires_ms.reset();
  cleared.charter_version.reset();
  cleared.charter_acked_epoch.reset();
  cleared.next_probe_ms.reset();
  cleared.blocked_reason.reset();
  cleared.last_transition_ms = kNow + 5;  // now, when not given
  cleared.version = want.version + 1;
  EXPECT_EQ(Columns(*w->role), Columns(cleared));
  EXPECT_EQ(Columns(*store().roles().GetRole(kCto)), Columns(cleared));
}

TEST_P(RoleStore, ActiveWithoutHolderIsRefusedByTheSchema) {
  RoleRecord row = *store().roles().ReserveRole(CtoReservation())->role;
  RoleCas cas = CasFrom(row);
  cas.patch.state = RoleState::kActive;
  absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(cas);
  EXPECT_EQ(ReasonOf(w.status()), "STORE_CONSTRAINT");
  EXPECT_EQ(store().roles().GetRole(kCto)->state, RoleState::kElectable);
}

TEST_P(RoleStore, AnotherWireForTheSameProjectKindAndScopeIsAConstraint) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  RoleReservation twin = CtoReservation();
  twin.role_key_wire = "rk2.cto-twin";
  EXPECT_EQ(ReasonOf(store().roles().ReserveRole(twin).status()),
            "STORE_CONSTRAINT");
  EXPECT_EQ(ReasonOf(store().roles().GetRole("rk2.cto-twin").status()),
            "ROLE_NOT_FOUND");
  EXPECT_EQ(store().roles().GetRole(kCto)->version, 0);
}

TEST_P(RoleStore, RawRowsBreakingTheRoleChecksAndUniquenessFail) {
  store();  // creates the schema
  Close();
  const std::string check =
      postgres() ? "violates check constraint" : "CHECK constraint failed";
  const std::string unique =
      postgres() ? "violates unique constraint" : "UNIQUE constraint failed";
  const std::string cols =
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "scope_id, state, holder_agent_id, last_transition_ms, last_reason) "
      "VALUES ";
  EXPECT_NE(
      Exec(cols + "('w1','p','cto','scp','electable',NULL,1,'x')").find(check),
      std::string::npos);
  EXPECT_NE(
      Exec(cols + "('w2','p','lead','','electable',NULL,1,'x')").find(check),
      std::string::npos);
  EXPECT_NE(Exec(cols + "('w3','p','cto','','active',NULL,1,'x')").find(check),
            std::string::npos);
  EXPECT_NE(Exec(cols + "('w4','p','cto','','offline',NULL,1,'x')").find(check),
            std::string::npos);
  EXPECT_EQ(Exec(cols + "('w5','p','cto','','electable',NULL,1,'x')"), "");
  EXPECT_NE(
      Exec(cols + "('w6','p','cto','','electable',NULL,1,'x')").find(unique),
      std::string::npos);
}

TEST_P(RoleStore, ExpiredHolderListingUsesLeaseAtOrBeforeNowAndSurvivesReopen) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = 999;
  ASSERT_TRUE(store().roles().ReserveRole(r).ok());
  Reopen();
  EXPECT_EQ(store().roles().GetRole(kCto)->holder_lease_expires_ms, 999);
  EXPECT_EQ(store().roles().ListRolesWithExpiredHolder(1000)->size(), 1u);
  EXPECT_EQ(store().roles().ListRolesWithExpiredHolder(999)->size(), 1u);
  EXPECT_TRUE(store().roles().ListRolesWithExpiredHolder(998)->empty());
}

TEST_P(RoleStore, RecoveryMakesExpiredHoldersElectableAndKeepsTheBacklog) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = 50;
  ASSERT_TRUE(store().roles().ReserveRole(r).ok());
  // Raw rows: the backlog's shape, whichever store wrote it. m0 expired,
  // m2 acknowledged, m3 of no role: none of them is pending for a role.
  const std::string cols =
      "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
      "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
      "trace_id, payload_json, status, role_key_wire) VALUES ";
  ASSERT_EQ(
      Exec(cols + "('m0','event','x','topic:role:rk2.cto-key','t',5,0,1,90,"
                  "'c','t','{}','queued','rk2.cto-key'),"
                  "('m1','event','x','topic:role:rk2.cto-key','t',5,0,1,10000,"
                  "'c','t','{}','queued','rk2.cto-key'),"
                  "('m2','event','x','topic:role:rk2.cto-key','t',5,0,1,10000,"
                  "'c','t','{}','acked','rk2.cto-key'),"
                  "('m3','event','x','agent-b','t',5,0,1,10000,"
                  "'c','t','{}','queued',NULL),"
                  "('m4','event','x','topic:role:rk2.cto-key','t',9,0,2,10000,"
                  "'c','t','{}','delivered','rk2.cto-key')"),
      "");

  absl::StatusOr<RecoveryResult> rec = store().roles().RecoverRoles(100);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->recovered.size(), 1u);
  const RoleRecord& role = rec->recovered[0];
  EXPECT_EQ(role.state, RoleState::kElectable);
  EXPECT_FALSE(role.holder_agent_id.has_value());
  EXPECT_EQ(role.previous_holder_agent_id, "agent-a");
  EXPECT_EQ(role.epoch, 1);
  EXPECT_EQ(role.activation_seq, 1);
  EXPECT_FALSE(role.activation_id.has_value());
  EXPECT_EQ(role.last_reason, "restart_holder_lease_expired");
  ASSERT_EQ(rec->pending_role_messages.size(), 2u);
  EXPECT_EQ(rec->pending_role_messages[0].id, "m4");  // priority first
  EXPECT_EQ(rec->pending_role_messages[1].id, "m1");
  ASSERT_EQ(rec->roles.size(), 1u);
  EXPECT_EQ(rec->roles[0].version, role.version);
}

TEST_P(RoleStore, RecoveryReprobesLiveHoldersUnderANewActivationNeverActive) {
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = kNow + 60'000;
  RoleRecord row = *store().roles().ReserveRole(r)->role;
  RoleCas cas = CasFrom(row);
  cas.patch.state = RoleState::kActive;
  cas.patch.charter_acked_epoch = row.epoch;
  ASSERT_EQ(store().roles().CompareAndSetRole(cas)->outcome,
            RoleOutcome::kApplied);

  absl::StatusOr<RecoveryResult> rec = store().roles().RecoverRoles(kNow);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->recovered.size(), 1u);
  const RoleRecord& role = rec->recovered[0];
  EXPECT_EQ(role.state, RoleState::kElectedProbing);
  EXPECT_EQ(role.holder_agent_id, "agent-a");
  EXPECT_EQ(role.epoch, row.epoch + 1);
  EXPECT_NE(role.activation_id, row.activation_id);
  EXPECT_FALSE(role.charter_acked_epoch.has_value());
  EXPECT_FALSE(role.activation_deadline_ms.has_value());
  EXPECT_EQ(role.last_reason, "restart_reprobe_required");
}

TEST_P(RoleStore, RecoveryFencesOrphanedActivationsAndLeavesQuarantineAlone) {
  RoleReservation orphan = CtoReservation();
  orphan.patch.activation_id = "dangling";
  ASSERT_TRUE(store().roles().ReserveRole(orphan).ok());
  RoleReservation quarantined = LeadReservation();
  quarantined.patch.state = RoleState::kQuarantined;
  quarantined.patch.next_probe_ms = kNow + 120'000;
  ASSERT_TRUE(store().roles().ReserveRole(quarantined).ok());

  absl::StatusOr<RecoveryResult> rec = store().roles().RecoverRoles(kNow);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->recovered.size(), 1u);
  EXPECT_EQ(rec->recovered[0].role_key_wire, kCto);
  EXPECT_EQ(rec->recovered[0].last_reason, "restart_activation_fenced");
  EXPECT_FALSE(rec->recovered[0].activation_id.has_value());
  EXPECT_EQ(rec->recovered[0].epoch, 1);
  RoleRecord lead = *store().roles().GetRole(kLead);
  EXPECT_EQ(lead.state, RoleState::kQuarantined);
  EXPECT_EQ(lead.next_probe_ms, kNow + 120'000);
  EXPECT_EQ(lead.epoch, 0);
  EXPECT_EQ(rec->roles.size(), 2u);
}

TEST_P(RoleStore, ListRolesFiltersByKindAndState) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  RoleReservation lead = LeadReservation();
  lead.patch.holder_agent_id = "agent-l";
  ASSERT_TRUE(store().roles().ReserveRole(lead).ok());
  auto leads = store().roles().ListRoles(ByKind("lead"));
  ASSERT_TRUE(leads.ok()) << leads.status();
  ASSERT_EQ(leads->size(), 1u);
  EXPECT_EQ((*leads)[0].role_key_wire, kLead);
  RoleFilter probing;
  probing.states = {RoleState::kElectedProbing};
  EXPECT_EQ(store().roles().ListRoles(probing)->size(), 1u);
  RoleFilter scope;
  scope.scope_id = "scp_1";
  EXPECT_EQ(store().roles().ListRoles(scope)->size(), 1u);
}

TEST_P(RoleStore, ListRolesPagesByWireInByteOrder) {
  // Upper case sorts before lower case in bytes, not in most collations.
  for (const char* wire : {"rk2.b", "rk2.B", "rk2.a", "rk2.C"}) {
    RoleReservation r = LeadReservation();
    r.role_key_wire = wire;
    r.scope_id = std::string("scp_") + wire;
    r.project_id = wire[4] == 'a' ? "prj_2" : "prj_1";
    ASSERT_TRUE(store().roles().ReserveRole(r).ok());
  }
  RoleFilter page;
  page.limit = 2;
  absl::StatusOr<std::vector<RoleRecord>> first =
      store().roles().ListRoles(page);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].role_key_wire, "rk2.B");
  EXPECT_EQ((*first)[1].role_key_wire, "rk2.C");
  page.after_wire = (*first)[1].role_key_wire;
  absl::StatusOr<std::vector<RoleRecord>> second =
      store().roles().ListRoles(page);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[0].role_key_wire, "rk2.a");
  EXPECT_EQ((*second)[1].role_key_wire, "rk2.b");
  page.after_wire = "rk2.b";
  EXPECT_TRUE(store().roles().ListRoles(page)->empty());

  RoleFilter projects;
  projects.projects = std::vector<std::string>{"prj_2"};
  ASSERT_EQ(store().roles().ListRoles(projects)->size(), 1u);
  projects.projects = std::vector<std::string>{};
  EXPECT_TRUE(store().roles().ListRoles(projects)->empty());
}

class CandidateStore : public StoreTest {
 protected:
  // Registers `id` as a candidate of `wire` at `priority`, at kNow.
  void AddCandidate(const std::string& wire, const std::string& id,
                    int64_t priority) {
    CandidateUpsert u;
    u.role_key_wire = wire;
    u.agent_id = id;
    u.priority = priority;
    u.now_ms = kNow;
    ASSERT_TRUE(store().roles().UpsertCandidate(u).ok());
  }
};
HUB_STORE_TEST_SUITE(CandidateStore);

TEST_P(CandidateStore, UpsertMergesAbsentFieldsAndClearsExplicitNulls) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  u.transport_locators_json = R"([{"kind":"tmux"}])";
  u.excluded_until_ms = kNow + 5;
  u.last_probe_code = "probe_ok";
  u.now_ms = kNow;
  absl::StatusOr<CandidateRecord> c = store().roles().UpsertCandidate(u);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "operator");
  EXPECT_EQ(c->priority, 0);
  EXPECT_EQ(c->excluded_until_ms, kNow + 5);
  EXPECT_FALSE(c->last_probe_ms.has_value());

  CandidateUpsert merge;
  merge.role_key_wire = kCto;
  merge.agent_id = "agent-a";
  merge.priority = 7;
  merge.source = "grant";
  merge.excluded_until_ms = Patch<int64_t>::Clear();
  merge.now_ms = kNow + 1;
  c = store().roles().UpsertCandidate(merge);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->priority, 7);
  EXPECT_EQ(c->source, "grant");
  EXPECT_EQ(c->transport_locators_json, R"([{"kind":"tmux"}])");
  EXPECT_FALSE(c->excluded_until_ms.has_value());
  EXPECT_EQ(c->last_probe_code, "probe_ok");
  EXPECT_EQ(c->updated_at_ms, kNow + 1);
  EXPECT_EQ((*store().roles().ListCandidates(kCto))[0].priority, 7);
}

TEST_P(CandidateStore, ReachabilityCountsFailuresAndResetsOnSuccess) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  u.now_ms = kNow;
  ASSERT_TRUE(store().roles().UpsertCandidate(u).ok());
  ReachabilityUpdate failed;
  failed.role_key_wire = kCto;
  failed.agent_id = "agent-a";
  failed.failures = ReachabilityUpdate::Failures::kIncrement;
  failed.excluded_until_ms = kNow + 1000;
  failed.last_probe_code = "probe_failed";
  failed.now_ms = kNow + 10;
  absl::StatusOr<CandidateRecord> c =
      store().roles().UpdateCandidateReachability(failed);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consecutive_probe_failures, 1);
  EXPECT_EQ(c->excluded_until_ms, kNow + 1000);
  EXPECT_EQ(c->last_probe_ms, kNow + 10);
  EXPECT_EQ(c->updated_at_ms, kNow);  // a probe is not an update
  c = store().roles().UpdateCandidateReachability(failed);
  EXPECT_EQ(c->consecutive_probe_failures, 2);
  // An exclusion derived in the write sees the count the write commits.
  failed.excluded_until_for = [](int64_t failures) {
    return kNow + 100 * failures;
  };
  c = store().roles().UpdateCandidateReachability(failed);
  EXPECT_EQ(c->consecutive_probe_failures, 3);
  EXPECT_EQ(c->excluded_until_ms, kNow + 300);

  ReachabilityUpdate ok;
  ok.role_key_wire = kCto;
  ok.agent_id = "agent-a";
  ok.failures = ReachabilityUpdate::Failures::kReset;
  ok.excluded_until_ms = Patch<int64_t>::Clear();
  ok.now_ms = kNow + 20;
  c = store().roles().UpdateCandidateReachability(ok);
  EXPECT_EQ(c->consecutive_probe_failures, 0);
  EXPECT_FALSE(c->excluded_until_ms.has_value());
  EXPECT_EQ(c->last_probe_code, "probe_failed");  // absent: kept

  ok.agent_id = "nobody";
  EXPECT_EQ(ReasonOf(store().roles().UpdateCandidateReachability(ok).status()),
            "CANDIDATE_NOT_FOUND");
}

TEST_P(CandidateStore, ListOrderIsPriorityThenRecencyThenAgentId) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  auto add = [&](const std::string& id, int64_t priority, int64_t at) {
    CandidateUpsert u;
    u.role_key_wire = kCto;
    u.agent_id = id;
    u.priority = priority;
    u.now_ms = at;
    ASSERT_TRUE(store().roles().UpsertCandidate(u).ok());
  };
  add("c", 1, 10);
  add("b", 1, 10);
  add("B", 1, 10);  // bytes: before "b"
  add("a", 1, 5);
  add("z", 9, 1);
  auto list = store().roles().ListCandidates(kCto);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ((*list)[0].agent_id, "z");
  EXPECT_EQ((*list)[1].agent_id, "B");
  EXPECT_EQ((*list)[2].agent_id, "b");
  EXPECT_EQ((*list)[3].agent_id, "c");
  EXPECT_EQ((*list)[4].agent_id, "a");
}

TEST_P(CandidateStore, SeveralRolesCandidatesComeInOneListInTheOrderAsked) {
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store().roles().ReserveRole(LeadReservation()).ok());
  auto add = [&](const std::string& wire, const std::string& id,
                 int64_t priority) { AddCandidate(wire, id, priority); };
  add(kCto, "cto-low", 1);
  add(kCto, "cto-high", 5);
  add(kLead, "lead-only", 3);
  auto ids = [](const std::vector<CandidateRecord>& rows) {
    std::vector<std::string> out;
    for (const CandidateRecord& c : rows) {
      out.push_back(c.role_key_wire + "/" + c.agent_id);
    }
    return out;
  };
  absl::StatusOr<std::vector<CandidateRecord>> both =
      store().roles().ListCandidatesOfRoles(
          {kLead, "rk2.no-such-role", kCto, kLead});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(ids(*both),
            (std::vector<std::string>{absl::StrCat(kLead, "/lead-only"),
                                      absl::StrCat(kCto, "/cto-high"),
                                      absl::StrCat(kCto, "/cto-low")}));
  absl::StatusOr<std::vector<CandidateRecord>> none =
      store().roles().ListCandidatesOfRoles({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_P(CandidateStore, PagesFollowTheWireThenTheActivatorsOrder) {
  RoleReservation lead = LeadReservation();
  lead.project_id = "prj_2";
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store().roles().ReserveRole(lead).ok());
  auto add = [&](const std::string& wire, const std::string& id,
                 int64_t priority) { AddCandidate(wire, id, priority); };
  add(kCto, "a", 1);
  add(kCto, "b", 5);
  add(kLead, "a", 3);
  add(kLead, "c", 3);
  CandidatePageQuery q;
  q.limit = 3;
  absl::StatusOr<std::vector<CandidateRecord>> page =
      store().roles().ListCandidatesPage(q);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 3u);
  EXPECT_EQ((*page)[0].agent_id, "b");  // rk2.cto-key, priority 5
  EXPECT_EQ((*page)[1].agent_id, "a");
  EXPECT_EQ((*page)[2].role_key_wire, kLead);
  EXPECT_EQ((*page)[2].agent_id, "a");
  const CandidateRecord& last = page->back();
  q.after = CandidatePageQuery::Key{last.role_key_wire, last.priority,
                                    last.updated_at_ms, last.agent_id};
  page = store().roles().ListCandidatesPage(q);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].agent_id, "c");

  CandidatePageQuery one_role;
  one_role.role_key_wire = kLead;
  one_role.after = CandidatePageQuery::Key{kCto, 0, 0, "z"};  // before it
  EXPECT_EQ(store().roles().ListCandidatesPage(one_role)->size(), 2u);
  one_role.after = CandidatePageQuery::Key{"rk2.zzz", 0, 0, ""};  // after it
  EXPECT_TRUE(store().roles().ListCandidatesPage(one_role)->empty());
  one_role.after.reset();
  one_role.agent_id = "c";
  EXPECT_EQ(store().roles().ListCandidatesPage(one_role)->size(), 1u);

  CandidatePageQuery of_project;
  of_project.projects = std::vector<std::string>{"prj_2"};
  EXPECT_EQ(store().roles().ListCandidatesPage(of_project)->size(), 2u);
  of_project.role_key_wire = kCto;
  EXPECT_TRUE(store().roles().ListCandidatesPage(of_project)->empty());
}

TEST_P(CandidateStore, CandidatesOfAMissingRoleAreRefusedAndDeletionCascades) {
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  EXPECT_EQ(ReasonOf(store().roles().UpsertCandidate(u).status()),
            "ROLE_NOT_FOUND");
  ASSERT_TRUE(store().roles().ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store().roles().UpsertCandidate(u).ok());
  u.agent_id = "agent-b";
  ASSERT_TRUE(store().roles().UpsertCandidate(u).ok());
  EXPECT_TRUE(*store().roles().DeleteCandidate(kCto, "agent-b"));
  EXPECT_FALSE(*store().roles().DeleteCandidate(kCto, "agent-b"));
  EXPECT_EQ(store().roles().ListCandidates(kCto)->size(), 1u);
  EXPECT_EQ(*store().roles().DeleteRole(kCto), RoleOutcome::kApplied);
  EXPECT_TRUE(store().roles().ListCandidates(kCto)->empty());
  EXPECT_EQ(*store().roles().DeleteRole(kCto), RoleOutcome::kNotFound);
}

// ---- several hubs over one PostgreSQL database ------------------------------

class MultiHubRoles : public StoreTest {
 protected:
  static constexpr int kHubs = 2;
  static constexpr int kThreadsPerHub = 3;
  static constexpr int kRounds = 15;

  void SetUp() override {
    StoreTest::SetUp();
    if (!postgres()) GTEST_SKIP() << "several hubs share PostgreSQL only";
    hubs_.push_back(&store());
    other_ = Open();
    ASSERT_NE(other_, nullptr);
    hubs_.push_back(other_.get());
  }
  void TearDown() override {
    other_.reset();
    StoreTest::TearDown();
  }

  // Runs `write(hub, thread)` on every thread of every hub at once and
  // returns the results.
  std::vector<absl::StatusOr<RoleWrite>> Race(
      const std::function<absl::StatusOr<RoleWrite>(Store&, int)>& write) {
    std::vector<absl::StatusOr<RoleWrite>> results(
        kHubs * kThreadsPerHub, absl::UnknownError("not run"));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kHubs * kThreadsPerHub; ++i) {
      threads.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kHubs * kThreadsPerHub) std::this_thread::yield();
        results[i] = write(*hubs_[i % kHubs], i);
      });
    }
    for (std::thread& t : threads) t.join();
    return results;
  }

  // Exactly one applied, every other one refused with `stale`, no error.
  void ExpectOneWinner(const std::vector<absl::StatusOr<RoleWrite>>& results,
                       RoleOutcome stale, RoleRecord* winner) {
    int applied = 0;
    for (const absl::StatusOr<RoleWrite>& w : results) {
      ASSERT_TRUE(w.ok()) << w.status();
      if (w->outcome == RoleOutcome::kApplied) {
        ++applied;
        *winner = *w->role;
      } else {
        EXPECT_EQ(w->outcome, stale) << RoleOutcomeName(w->outcome);
      }
    }
    EXPECT_EQ(applied, 1);
  }

  std::vector<Store*> hubs_;
  std::unique_ptr<Store> other_;
};
HUB_STORE_TEST_SUITE(MultiHubRoles);

TEST_P(MultiHubRoles, RacingReservationsHaveOneWinnerPerRoundAndEpochsRise) {
  RoleRecord current = *store().roles().ReserveRole(CtoReservation())->role;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<absl::StatusOr<RoleWrite>> results =
        Race([&](Store& hub, int thread) {
          RoleReservation r = CtoReservation();
          r.expected_version = current.version;
          r.expected_epoch = current.epoch;
          r.patch.holder_agent_id = absl::StrCat("agent-", thread);
          return hub.roles().ReserveRole(r);
        });
    RoleRecord winner;
    ExpectOneWinner(results, RoleOutcome::kStaleVersion, &winner);
    EXPECT_EQ(winner.epoch, current.epoch + 1);
    EXPECT_EQ(winner.activation_seq, current.activation_seq + 1);
    EXPECT_EQ(winner.version, current.version + 1);
    current = winner;
  }
  EXPECT_EQ(other_->roles().GetRole(kCto)->epoch, kRounds);
}

TEST_P(MultiHubRoles, RacingCompareAndSetsHaveOneWinnerPerRound) {
  RoleReservation first = CtoReservation();
  first.patch.holder_agent_id = "agent-a";
  RoleRecord current = *store().roles().ReserveRole(first)->role;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<absl::StatusOr<RoleWrite>> results =
        Race([&](Store& hub, int thread) {
          RoleCas cas = CasFrom(current);
          cas.patch.retry_count = thread;
          cas.patch.state =
              round % 2 == 0 ? RoleState::kActive : RoleState::kElectedProbing;
          return hub.roles().CompareAndSetRole(cas);
        });
    RoleRecord winner;
    ExpectOneWinner(results, RoleOutcome::kStaleVersion, &winner);
    EXPECT_EQ(winner.version, current.version + 1);
    EXPECT_EQ(winner.epoch, current.epoch);  // a CAS never moves the epoch
    current = winner;
  }
  absl::StatusOr<RoleRecord> seen = other_->roles().GetRole(kCto);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->version, kRounds);
}

TEST_P(MultiHubRoles, UnguardedFirstReservationsSerializeWithRisingEpochs) {
  // Unguarded reservations of a fresh role all apply, one after the other:
  // the first ones race to insert it, the losers wait and then update it.
  std::vector<absl::StatusOr<RoleWrite>> results =
      Race([&](Store& hub, int thread) {
        RoleReservation r = LeadReservation();
        r.patch.holder_agent_id = absl::StrCat("agent-", thread);
        return hub.roles().ReserveRole(r);
      });
  std::vector<int64_t> epochs;
  for (const absl::StatusOr<RoleWrite>& w : results) {
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
    epochs.push_back(w->role->epoch);
  }
  std::sort(epochs.begin(), epochs.end());
  for (size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(epochs[i], static_cast<int64_t>(i));
  }
  absl::StatusOr<RoleRecord> last = other_->roles().GetRole(kLead);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->epoch, kHubs * kThreadsPerHub - 1);
  EXPECT_EQ(last->version, kHubs * kThreadsPerHub - 1);
}

}  // namespace
}  // namespace hub::storage
