// Roles: reservation (§5.3), compare-and-set (§5.4), recovery (§5.7),
// candidates (§5.6), and the schema constraints on role rows.
#include <memory>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kCto[] = "rk2.cto-key";
constexpr char kLead[] = "rk2.lead-key";

std::unique_ptr<SqliteStore> Open(const std::string& path) {
  SqliteStoreOptions options;
  options.path = path;
  auto counter = std::make_shared<int>(0);
  options.new_id = [counter] { return "act-" + std::to_string(++*counter); };
  auto store = SqliteStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

RoleReservation CtoReservation() {
  RoleReservation r;
  r.role_key_wire = kCto;
  r.project_id = "prj_1";
  r.role_kind = "cto";
  r.scope_id = "";
  r.now_ms = kNow;
  return r;
}

RoleReservation LeadReservation() {
  RoleReservation r = CtoReservation();
  r.role_key_wire = kLead;
  r.role_kind = "lead";
  r.scope_id = "scp_1";
  return r;
}

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

RoleCas CasFrom(const RoleRecord& row) {
  RoleCas cas;
  cas.role_key_wire = row.role_key_wire;
  cas.expected_version = row.version;
  cas.expected_epoch = row.epoch;
  cas.expected_activation_seq = std::optional<int64_t>(row.activation_seq);
  cas.expected_activation_id = row.activation_id;
  cas.now_ms = kNow + 1;
  return cas;
}

TEST(RoleStore, FirstReservationInsertsAtEpochZeroAndRoundTrips) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = kNow + 30'000;
  absl::StatusOr<RoleWrite> w = store->ReserveRole(r);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->epoch, 0);
  EXPECT_EQ(w->role->activation_seq, 0);
  EXPECT_EQ(w->role->version, 0);
  EXPECT_EQ(w->role->state, "elected-probing");
  EXPECT_EQ(w->role->activation_id, "act-1");
  EXPECT_EQ(w->role->last_reason, "role_reserved");
  absl::StatusOr<RoleRecord> read = store->GetRole(kCto);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->holder_agent_id, "agent-a");
  EXPECT_EQ(store->ListRoles(ByProject("prj_1"))->size(), 1u);
}

TEST(RoleStore, EveryReservationOfAnExistingRowAddsExactlyOneToEpochAndSeq) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<RoleWrite> w = store->ReserveRole(CtoReservation());
    ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
    EXPECT_EQ(w->role->epoch, i);
    EXPECT_EQ(w->role->activation_seq, i);
    EXPECT_EQ(w->role->version, i);
    EXPECT_EQ(w->role->state, "electable");
  }
}

TEST(RoleStore, ReservationWithAnOldVersionOrEpochIsRefusedWithTheLatestRow) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());  // v1 e1

  RoleReservation old_version = CtoReservation();
  old_version.expected_version = 0;
  absl::StatusOr<RoleWrite> w = store->ReserveRole(old_version);
  EXPECT_EQ(w->outcome, RoleOutcome::kStaleVersion);
  EXPECT_EQ(w->role->version, 1);

  RoleReservation old_epoch = CtoReservation();
  old_epoch.expected_epoch = 0;
  EXPECT_EQ(store->ReserveRole(old_epoch)->outcome, RoleOutcome::kStaleEpoch);

  RoleReservation skip = CtoReservation();
  skip.next_epoch = 5;
  EXPECT_EQ(store->ReserveRole(skip)->outcome, RoleOutcome::kStaleEpoch);
  RoleReservation skip_seq = CtoReservation();
  skip_seq.next_activation_seq = 7;
  EXPECT_EQ(store->ReserveRole(skip_seq)->outcome,
            RoleOutcome::kStaleActivationSeq);
  EXPECT_EQ(store->GetRole(kCto)->epoch, 1);
  EXPECT_EQ(ReasonOf(ToStatus(RoleOutcome::kStaleEpoch)), "STALE_EPOCH");
}

TEST(RoleStore, ReservationRecordsThePreviousHolderWhenTheHolderChanges) {
  auto store = Open(FreshDbPath());
  RoleReservation a = CtoReservation();
  a.patch.holder_agent_id = "agent-a";
  ASSERT_TRUE(store->ReserveRole(a).ok());
  RoleReservation b = CtoReservation();
  b.patch.holder_agent_id = "agent-b";
  absl::StatusOr<RoleWrite> w = store->ReserveRole(b);
  EXPECT_EQ(w->role->previous_holder_agent_id, "agent-a");
  EXPECT_EQ(w->role->activation_id, "act-2");
  RoleReservation release = CtoReservation();
  release.patch.holder_agent_id = Patch<std::string>::Clear();
  release.patch.activation_id = Patch<std::string>::Clear();
  release.patch.last_reason = "holder_lease_expired";
  w = store->ReserveRole(release);
  EXPECT_EQ(w->role->state, "electable");
  EXPECT_FALSE(w->role->holder_agent_id.has_value());
  EXPECT_FALSE(w->role->activation_id.has_value());
  EXPECT_EQ(w->role->previous_holder_agent_id, "agent-b");
  EXPECT_EQ(w->role->last_reason, "holder_lease_expired");
}

TEST(RoleStore, CasWithAllFourGuardsActivatesAndBumpsOnlyTheVersion) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  RoleRecord reserved = *store->ReserveRole(r)->role;
  RoleCas cas = CasFrom(reserved);
  cas.patch.state = "active";
  cas.patch.charter_acked_epoch = reserved.epoch;
  cas.patch.last_reason = "activation_acked";
  absl::StatusOr<RoleWrite> w = store->CompareAndSetRole(cas);
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->state, "active");
  EXPECT_EQ(w->role->version, reserved.version + 1);
  EXPECT_EQ(w->role->epoch, reserved.epoch);
  EXPECT_EQ(w->role->activation_seq, reserved.activation_seq);
  EXPECT_EQ(w->role->last_transition_ms, kNow + 1);

  // Replaying the same CAS (old version) is refused.
  EXPECT_EQ(store->CompareAndSetRole(cas)->outcome, RoleOutcome::kStaleVersion);
}

TEST(RoleStore, CasReportsTheFirstStaleGuardInOrder) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  RoleRecord row = *store->ReserveRole(r)->role;

  RoleCas wrong_epoch = CasFrom(row);
  wrong_epoch.expected_epoch = row.epoch + 1;
  EXPECT_EQ(store->CompareAndSetRole(wrong_epoch)->outcome,
            RoleOutcome::kStaleEpoch);
  RoleCas wrong_seq = CasFrom(row);
  wrong_seq.expected_activation_seq = std::optional<int64_t>(9);
  EXPECT_EQ(store->CompareAndSetRole(wrong_seq)->outcome,
            RoleOutcome::kStaleActivationSeq);
  RoleCas wrong_id = CasFrom(row);
  wrong_id.expected_activation_id = std::optional<std::string>("other");
  EXPECT_EQ(store->CompareAndSetRole(wrong_id)->outcome,
            RoleOutcome::kStaleActivationId);
  RoleCas null_id = CasFrom(row);
  null_id.expected_activation_id = std::optional<std::string>();
  EXPECT_EQ(store->CompareAndSetRole(null_id)->outcome,
            RoleOutcome::kStaleActivationId);
  EXPECT_EQ(store->GetRole(kCto)->version, row.version);
}

TEST(RoleStore, CasComparesANullActivationIdNullSafely) {
  auto store = Open(FreshDbPath());
  RoleRecord row = *store->ReserveRole(CtoReservation())->role;
  ASSERT_FALSE(row.activation_id.has_value());
  RoleCas cas = CasFrom(row);  // expects activation_id NULL
  cas.patch.blocked_reason = "no_candidate";
  absl::StatusOr<RoleWrite> w = store->CompareAndSetRole(cas);
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_EQ(w->role->blocked_reason, "no_candidate");
}

TEST(RoleStore, CasWithoutAllFourGuardsIsInvalidAndMissingRowIsNotFound) {
  auto store = Open(FreshDbPath());
  RoleRecord row = *store->ReserveRole(CtoReservation())->role;
  RoleCas missing_id = CasFrom(row);
  missing_id.expected_activation_id.reset();
  EXPECT_EQ(store->CompareAndSetRole(missing_id)->outcome,
            RoleOutcome::kInvalidCas);
  RoleCas missing_version = CasFrom(row);
  missing_version.expected_version.reset();
  EXPECT_EQ(store->CompareAndSetRole(missing_version)->outcome,
            RoleOutcome::kInvalidCas);
  RoleCas absent = CasFrom(row);
  absent.role_key_wire = "rk2.nothing";
  EXPECT_EQ(store->CompareAndSetRole(absent)->outcome, RoleOutcome::kNotFound);
}

TEST(RoleStore, CasPatchKeepsAbsentFieldsAndClearsExplicitNulls) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.activation_deadline_ms = kNow + 45'000;
  r.patch.charter_version = "charter-1";
  r.patch.retry_count = 2;
  RoleRecord row = *store->ReserveRole(r)->role;
  RoleCas cas = CasFrom(row);
  cas.patch.activation_deadline_ms = Patch<int64_t>::Clear();
  cas.patch.retry_count = Patch<int64_t>::Clear();  // NOT NULL: keeps
  cas.patch.last_reason = Patch<std::string>::Clear();
  absl::StatusOr<RoleWrite> w = store->CompareAndSetRole(cas);
  ASSERT_EQ(w->outcome, RoleOutcome::kApplied);
  EXPECT_FALSE(w->role->activation_deadline_ms.has_value());
  EXPECT_EQ(w->role->charter_version, "charter-1");
  EXPECT_EQ(w->role->retry_count, 2);
  EXPECT_EQ(w->role->last_reason, "role_reserved");
}

TEST(RoleStore, ActiveWithoutHolderIsRefusedByTheSchema) {
  auto store = Open(FreshDbPath());
  RoleRecord row = *store->ReserveRole(CtoReservation())->role;
  RoleCas cas = CasFrom(row);
  cas.patch.state = "active";
  absl::StatusOr<RoleWrite> w = store->CompareAndSetRole(cas);
  EXPECT_EQ(ReasonOf(w.status()), "STORE_CONSTRAINT");
  EXPECT_EQ(store->GetRole(kCto)->state, "electable");
}

TEST(RoleStore, UnknownStateIsInvalidArgument) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.state = "offline";
  EXPECT_EQ(ReasonOf(store->ReserveRole(r).status()), "ROLE_STATE_INVALID");
}

TEST(RoleStore, RawRowsBreakingTheRoleChecksAndUniquenessFail) {
  std::string path = FreshDbPath();
  { auto store = Open(path); }
  RawDb raw(path);
  const std::string cols =
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "scope_id, state, holder_agent_id, last_transition_ms, last_reason) "
      "VALUES ";
  EXPECT_NE(raw.Exec(cols + "('w1','p','cto','scp','electable',NULL,1,'x')")
                .find("CHECK constraint failed"),
            std::string::npos);
  EXPECT_NE(raw.Exec(cols + "('w2','p','lead','','electable',NULL,1,'x')")
                .find("CHECK constraint failed"),
            std::string::npos);
  EXPECT_NE(raw.Exec(cols + "('w3','p','cto','','active',NULL,1,'x')")
                .find("CHECK constraint failed"),
            std::string::npos);
  EXPECT_NE(raw.Exec(cols + "('w4','p','cto','','offline',NULL,1,'x')")
                .find("CHECK constraint failed"),
            std::string::npos);
  EXPECT_EQ(raw.Exec(cols + "('w5','p','cto','','electable',NULL,1,'x')"), "");
  EXPECT_NE(raw.Exec(cols + "('w6','p','cto','','electable',NULL,1,'x')")
                .find("UNIQUE constraint failed"),
            std::string::npos);
}

TEST(RoleStore, ExpiredHolderListingUsesLeaseAtOrBeforeNowAndSurvivesReopen) {
  std::string path = FreshDbPath();
  {
    auto store = Open(path);
    RoleReservation r = CtoReservation();
    r.patch.holder_agent_id = "agent-a";
    r.patch.holder_lease_expires_ms = 999;
    ASSERT_TRUE(store->ReserveRole(r).ok());
  }
  auto store = Open(path);
  EXPECT_EQ(store->GetRole(kCto)->holder_lease_expires_ms, 999);
  EXPECT_EQ(store->ListRolesWithExpiredHolder(1000)->size(), 1u);
  EXPECT_EQ(store->ListRolesWithExpiredHolder(999)->size(), 1u);
  EXPECT_TRUE(store->ListRolesWithExpiredHolder(998)->empty());
}

TEST(RoleStore, RecoveryMakesExpiredHoldersElectableAndKeepsTheBacklog) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = 50;
  ASSERT_TRUE(store->ReserveRole(r).ok());
  MessageRecord m;
  m.id = "m1";
  m.type = "event";
  m.from_agent = "x";
  m.to_agent = std::string("topic:role:") + kCto;
  m.topic = "t";
  m.expires_at_ms = 10'000;
  m.correlation_id = "c";
  m.trace_id = "t";
  m.role_key_wire = kCto;
  ASSERT_TRUE(store->InsertMessage(m, {}).ok());

  absl::StatusOr<RecoveryResult> rec = store->RecoverRoles(100);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->recovered.size(), 1u);
  const RoleRecord& role = rec->recovered[0];
  EXPECT_EQ(role.state, "electable");
  EXPECT_FALSE(role.holder_agent_id.has_value());
  EXPECT_EQ(role.previous_holder_agent_id, "agent-a");
  EXPECT_EQ(role.epoch, 1);
  EXPECT_EQ(role.activation_seq, 1);
  EXPECT_FALSE(role.activation_id.has_value());
  EXPECT_EQ(role.last_reason, "restart_holder_lease_expired");
  ASSERT_EQ(rec->pending_role_messages.size(), 1u);
  EXPECT_EQ(rec->pending_role_messages[0].id, "m1");
}

TEST(RoleStore, RecoveryReprobesLiveHoldersUnderANewActivationNeverActive) {
  auto store = Open(FreshDbPath());
  RoleReservation r = CtoReservation();
  r.patch.holder_agent_id = "agent-a";
  r.patch.holder_lease_expires_ms = kNow + 60'000;
  RoleRecord row = *store->ReserveRole(r)->role;
  RoleCas cas = CasFrom(row);
  cas.patch.state = "active";
  cas.patch.charter_acked_epoch = row.epoch;
  ASSERT_EQ(store->CompareAndSetRole(cas)->outcome, RoleOutcome::kApplied);

  absl::StatusOr<RecoveryResult> rec = store->RecoverRoles(kNow);
  ASSERT_EQ(rec->recovered.size(), 1u);
  const RoleRecord& role = rec->recovered[0];
  EXPECT_EQ(role.state, "elected-probing");
  EXPECT_EQ(role.holder_agent_id, "agent-a");
  EXPECT_EQ(role.epoch, row.epoch + 1);
  EXPECT_NE(role.activation_id, row.activation_id);
  EXPECT_FALSE(role.charter_acked_epoch.has_value());
  EXPECT_FALSE(role.activation_deadline_ms.has_value());
  EXPECT_EQ(role.last_reason, "restart_reprobe_required");
}

TEST(RoleStore, RecoveryFencesOrphanedActivationsAndLeavesQuarantineAlone) {
  auto store = Open(FreshDbPath());
  RoleReservation orphan = CtoReservation();
  orphan.patch.activation_id = "dangling";
  ASSERT_TRUE(store->ReserveRole(orphan).ok());
  RoleReservation quarantined = LeadReservation();
  quarantined.patch.state = "quarantined";
  quarantined.patch.next_probe_ms = kNow + 120'000;
  ASSERT_TRUE(store->ReserveRole(quarantined).ok());

  absl::StatusOr<RecoveryResult> rec = store->RecoverRoles(kNow);
  ASSERT_EQ(rec->recovered.size(), 1u);
  EXPECT_EQ(rec->recovered[0].role_key_wire, kCto);
  EXPECT_EQ(rec->recovered[0].last_reason, "restart_activation_fenced");
  EXPECT_FALSE(rec->recovered[0].activation_id.has_value());
  EXPECT_EQ(rec->recovered[0].epoch, 1);
  RoleRecord lead = *store->GetRole(kLead);
  EXPECT_EQ(lead.state, "quarantined");
  EXPECT_EQ(lead.next_probe_ms, kNow + 120'000);
  EXPECT_EQ(lead.epoch, 0);
  EXPECT_EQ(rec->roles.size(), 2u);
}

TEST(RoleStore, ListRolesFiltersByKindAndState) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  RoleReservation lead = LeadReservation();
  lead.patch.holder_agent_id = "agent-l";
  ASSERT_TRUE(store->ReserveRole(lead).ok());
  auto leads = store->ListRoles(ByKind("lead"));
  ASSERT_EQ(leads->size(), 1u);
  EXPECT_EQ((*leads)[0].role_key_wire, kLead);
  RoleFilter probing;
  probing.states = {"elected-probing"};
  EXPECT_EQ(store->ListRoles(probing)->size(), 1u);
}

TEST(CandidateStore, UpsertMergesAbsentFieldsAndClearsExplicitNulls) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  u.transport_locators_json = R"([{"kind":"tmux"}])";
  u.excluded_until_ms = kNow + 5;
  u.now_ms = kNow;
  absl::StatusOr<CandidateRecord> c = store->UpsertCandidate(u);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "operator");
  EXPECT_EQ(c->priority, 0);

  CandidateUpsert merge;
  merge.role_key_wire = kCto;
  merge.agent_id = "agent-a";
  merge.priority = 7;
  merge.excluded_until_ms = Patch<int64_t>::Clear();
  merge.now_ms = kNow + 1;
  c = store->UpsertCandidate(merge);
  EXPECT_EQ(c->priority, 7);
  EXPECT_EQ(c->transport_locators_json, R"([{"kind":"tmux"}])");
  EXPECT_FALSE(c->excluded_until_ms.has_value());
  EXPECT_EQ(c->updated_at_ms, kNow + 1);
}

TEST(CandidateStore, ReachabilityCountsFailuresAndResetsOnSuccess) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  u.now_ms = kNow;
  ASSERT_TRUE(store->UpsertCandidate(u).ok());
  ReachabilityUpdate failed;
  failed.role_key_wire = kCto;
  failed.agent_id = "agent-a";
  failed.failures = ReachabilityUpdate::Failures::kIncrement;
  failed.excluded_until_ms = kNow + 1000;
  failed.last_probe_code = "probe_failed";
  failed.now_ms = kNow + 10;
  absl::StatusOr<CandidateRecord> c =
      store->UpdateCandidateReachability(failed);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->consecutive_probe_failures, 1);
  EXPECT_EQ(c->excluded_until_ms, kNow + 1000);
  EXPECT_EQ(c->last_probe_ms, kNow + 10);
  c = store->UpdateCandidateReachability(failed);
  EXPECT_EQ(c->consecutive_probe_failures, 2);
  // An exclusion derived in the write sees the count the write commits.
  failed.excluded_until_for = [](int64_t failures) {
    return kNow + 100 * failures;
  };
  c = store->UpdateCandidateReachability(failed);
  EXPECT_EQ(c->consecutive_probe_failures, 3);
  EXPECT_EQ(c->excluded_until_ms, kNow + 300);

  ReachabilityUpdate ok;
  ok.role_key_wire = kCto;
  ok.agent_id = "agent-a";
  ok.failures = ReachabilityUpdate::Failures::kReset;
  ok.excluded_until_ms = Patch<int64_t>::Clear();
  ok.now_ms = kNow + 20;
  c = store->UpdateCandidateReachability(ok);
  EXPECT_EQ(c->consecutive_probe_failures, 0);
  EXPECT_FALSE(c->excluded_until_ms.has_value());
  EXPECT_EQ(c->last_probe_code, "probe_failed");  // absent: kept

  ok.agent_id = "nobody";
  EXPECT_EQ(ReasonOf(store->UpdateCandidateReachability(ok).status()),
            "CANDIDATE_NOT_FOUND");
}

TEST(CandidateStore, ListOrderIsPriorityThenRecencyThenAgentId) {
  auto store = Open(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  auto add = [&](const std::string& id, int64_t priority, int64_t at) {
    CandidateUpsert u;
    u.role_key_wire = kCto;
    u.agent_id = id;
    u.priority = priority;
    u.now_ms = at;
    ASSERT_TRUE(store->UpsertCandidate(u).ok());
  };
  add("c", 1, 10);
  add("b", 1, 10);
  add("a", 1, 5);
  add("z", 9, 1);
  auto list = store->ListCandidates(kCto);
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0].agent_id, "z");
  EXPECT_EQ((*list)[1].agent_id, "b");
  EXPECT_EQ((*list)[2].agent_id, "c");
  EXPECT_EQ((*list)[3].agent_id, "a");
}

TEST(CandidateStore, CandidatesOfAMissingRoleAreRefusedAndDeletionCascades) {
  auto store = Open(FreshDbPath());
  CandidateUpsert u;
  u.role_key_wire = kCto;
  u.agent_id = "agent-a";
  EXPECT_EQ(ReasonOf(store->UpsertCandidate(u).status()), "ROLE_NOT_FOUND");
  ASSERT_TRUE(store->ReserveRole(CtoReservation()).ok());
  ASSERT_TRUE(store->UpsertCandidate(u).ok());
  EXPECT_EQ(*store->DeleteRole(kCto), RoleOutcome::kApplied);
  EXPECT_TRUE(store->ListCandidates(kCto)->empty());
  EXPECT_EQ(*store->DeleteRole(kCto), RoleOutcome::kNotFound);
}

}  // namespace
}  // namespace hub::storage
