// Closed lead scopes: CloseLeadScope's one transaction (record, role row,
// candidates, dead-lettered backlog), its idempotent repeat, and the refusals
// inside later writes that keep a closed scope from coming back.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kLead[] = "rk2.lead-key";
constexpr char kOtherLead[] = "rk2.other-lead-key";

RoleReservation LeadReservation(const std::string& wire = kLead,
                                const std::string& scope = "scp_1") {
  RoleReservation r;
  r.role_key_wire = wire;
  r.project_id = "prj_1";
  r.role_kind = "lead";
  r.scope_id = scope;
  r.now_ms = kNow;
  return r;
}

ScopeClose Close(const std::string& wire = kLead,
                 const std::string& scope = "scp_1") {
  ScopeClose c;
  c.project_id = "prj_1";
  c.scope_id = scope;
  c.role_key_wire = wire;
  c.closed_by = "ops";
  c.reason = "scope finished";
  c.now_ms = kNow + 50;
  return c;
}

MessageRecord RoleMsg(const std::string& id, const std::string& wire = kLead,
                      const std::string& type = "request") {
  MessageRecord m;
  m.id = id;
  m.type = type;
  m.from_agent = "sender";
  m.to_agent = std::string("topic:role:") + wire;
  m.topic = "work";
  m.priority = 5;
  m.ttl_ms = 300'000;
  m.created_at_ms = kNow;
  m.expires_at_ms = kNow + 300'000;
  m.correlation_id = "corr-" + id;
  m.trace_id = "trace-" + id;
  m.role_key_wire = wire;
  return m;
}

CandidateUpsert Candidate(const std::string& agent,
                          const std::string& wire = kLead) {
  CandidateUpsert u;
  u.role_key_wire = wire;
  u.agent_id = agent;
  u.now_ms = kNow;
  return u;
}

TEST(ScopeClose, ClosingRemovesTheRoleItsCandidatesAndDeadLettersItsBacklog) {
  auto store = OpenOrDie(FreshDbPath());
  RoleReservation held = LeadReservation();
  held.patch.holder_agent_id = std::string("holder");
  ASSERT_TRUE(store->ReserveRole(held).ok());
  ASSERT_TRUE(store->UpsertCandidate(Candidate("holder")).ok());
  ASSERT_TRUE(store->UpsertCandidate(Candidate("other")).ok());
  // Backlog: one queued, one already handed to the holder (delivered), one
  // acknowledged (untouched), and a message of another role (untouched).
  ASSERT_TRUE(store->InsertMessage(RoleMsg("queued"), {}).ok());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("handed"), {}).ok());
  ASSERT_TRUE(store->AddRecipient("handed", "holder").ok());
  ASSERT_TRUE(store->MarkDelivered("handed", "holder", kNow + 1).ok());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("done"), {}).ok());
  ASSERT_TRUE(store->AddRecipient("done", "holder").ok());
  ASSERT_TRUE(store->MarkDelivered("done", "holder", kNow + 1).ok());
  ASSERT_TRUE(*store->AckMessage("done", "holder", kNow + 2));
  ASSERT_TRUE(store->InsertMessage(RoleMsg("elsewhere", kOtherLead), {}).ok());

  absl::StatusOr<ScopeCloseResult> closed = store->CloseLeadScope(Close());
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(closed->already_closed);
  EXPECT_EQ(closed->closed.role_key_wire, kLead);
  EXPECT_EQ(closed->closed.closed_at_ms, kNow + 50);
  EXPECT_EQ(closed->closed.closed_by, "ops");
  EXPECT_EQ(closed->closed.reason, "scope finished");
  EXPECT_EQ(closed->closed.dead_lettered_count, 2);
  ASSERT_TRUE(closed->removed_role.has_value());
  EXPECT_EQ(closed->removed_role->holder_agent_id, "holder");
  EXPECT_EQ(closed->candidates_removed, 2);
  ASSERT_EQ(closed->dead_lettered.size(), 2u);
  for (const ClaimedMessage& c : closed->dead_lettered) {
    EXPECT_EQ(c.transition.reason, "ROLE_SCOPE_CLOSED");
    EXPECT_TRUE(c.transition.dlq_inserted);
    EXPECT_EQ(c.transition.previous_status, c.message.status);
  }

  EXPECT_EQ(ReasonOf(store->GetRole(kLead).status()), "ROLE_NOT_FOUND");
  EXPECT_TRUE(store->ListCandidates(kLead)->empty());
  EXPECT_EQ(store->GetMessage("queued")->status, "dead_letter");
  EXPECT_EQ(store->GetMessage("handed")->status, "dead_letter");
  EXPECT_EQ(store->GetDeadLetter("queued")->reason, "ROLE_SCOPE_CLOSED");
  EXPECT_EQ(store->GetDeadLetter("handed")->last_error,
            "lead scope closed by ops: scope finished");
  EXPECT_EQ(store->GetMessage("done")->status, "acked");
  EXPECT_EQ(store->GetMessage("elsewhere")->status, "queued");
  EXPECT_TRUE(store->ListPendingRoleMessages(kLead, kNow)->empty());
  EXPECT_TRUE(store->ListPendingForAgent("holder", kNow, 100)->empty());
  std::optional<ClosedScopeRecord> record = *store->GetClosedScope(kLead);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->scope_id, "scp_1");
  EXPECT_EQ(record->dead_lettered_count, 2);
  EXPECT_FALSE(store->GetClosedScope(kOtherLead)->has_value());
}

TEST(ScopeClose, ClosingAgainChangesNothingAndReturnsTheFirstRecord) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(LeadReservation()).ok());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("m1"), {}).ok());
  ASSERT_EQ(store->CloseLeadScope(Close())->dead_lettered.size(), 1u);
  ScopeClose again = Close();
  again.closed_by = "someone-else";
  again.reason = "";
  again.now_ms = kNow + 999;
  absl::StatusOr<ScopeCloseResult> repeat = store->CloseLeadScope(again);
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_TRUE(repeat->already_closed);
  EXPECT_EQ(repeat->closed.closed_at_ms, kNow + 50);
  EXPECT_EQ(repeat->closed.closed_by, "ops");
  EXPECT_EQ(repeat->closed.dead_lettered_count, 1);  // the first close's
  EXPECT_FALSE(repeat->removed_role.has_value());
  EXPECT_EQ(repeat->candidates_removed, 0);
  EXPECT_TRUE(repeat->dead_lettered.empty());
  EXPECT_EQ(store->GetDeadLetter("m1")->failed_at_ms, kNow + 50);
}

TEST(ScopeClose, AScopeWithoutARoleRowIsClosedAndItsBacklogStillDeadLettered) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("m1"), {}).ok());
  absl::StatusOr<ScopeCloseResult> closed = store->CloseLeadScope(Close());
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(closed->removed_role.has_value());
  ASSERT_EQ(closed->dead_lettered.size(), 1u);
  EXPECT_EQ(closed->dead_lettered[0].message.id, "m1");
}

TEST(ScopeClose, AnEarlierDeadLetterReasonWinsAndIsReportedNotInserted) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("m1"), {}).ok());
  {
    // A dead letter row left behind for a message still queued (a failure
    // recorded by an older hub): first writer wins.
    RawDb raw(store->Info().db_path);
    ASSERT_EQ(raw.Exec("INSERT INTO dead_letters (message_id, reason, "
                       "failed_at_ms) VALUES ('m1', 'delivery_error', 1)"),
              "");
  }
  absl::StatusOr<ScopeCloseResult> closed = store->CloseLeadScope(Close());
  ASSERT_TRUE(closed.ok());
  ASSERT_EQ(closed->dead_lettered.size(), 1u);
  EXPECT_FALSE(closed->dead_lettered[0].transition.dlq_inserted);
  EXPECT_EQ(store->GetDeadLetter("m1")->reason, "delivery_error");
  EXPECT_EQ(store->GetMessage("m1")->status, "dead_letter");
}

TEST(ScopeClose, EveryWriteThatWouldBringAClosedScopeBackIsRefused) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->ReserveRole(LeadReservation()).ok());
  ASSERT_TRUE(store->UpsertCandidate(Candidate("agent-a")).ok());
  ASSERT_TRUE(store->CloseLeadScope(Close()).ok());

  auto expect_closed = [](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(ReasonOf(s), "ROLE_SCOPE_CLOSED") << s;
    EXPECT_EQ(MetadataOf(s)["role_key_wire"], kLead);
  };
  expect_closed(store->ReserveRole(LeadReservation()).status());
  // The same project and scope under another spelling of the wire (the
  // store matches the decoded identity too).
  expect_closed(
      store->ReserveRole(LeadReservation("rk2.same-scope", "scp_1")).status());
  RoleCas cas;
  cas.role_key_wire = kLead;
  cas.expected_version = 0;
  cas.expected_epoch = 0;
  cas.expected_activation_seq = std::optional<int64_t>(0);
  cas.expected_activation_id = std::optional<std::string>();
  expect_closed(store->CompareAndSetRole(cas).status());
  expect_closed(store->UpsertCandidate(Candidate("agent-a")).status());
  ReachabilityUpdate probe;
  probe.role_key_wire = kLead;
  probe.agent_id = "agent-a";
  probe.now_ms = kNow;
  expect_closed(store->UpdateCandidateReachability(probe).status());
  expect_closed(store->InsertMessage(RoleMsg("late"), {}));
  expect_closed(
      store->InsertMessageDelivering(RoleMsg("late"), {"x"}, {"x"}, kNow, 10)
          .status());
  // Nothing was written by the refused calls.
  EXPECT_EQ(ReasonOf(store->GetRole(kLead).status()), "ROLE_NOT_FOUND");
  EXPECT_EQ(ReasonOf(store->GetRole("rk2.same-scope").status()),
            "ROLE_NOT_FOUND");
  EXPECT_TRUE(store->ListCandidates(kLead)->empty());
  EXPECT_EQ(ReasonOf(store->GetMessage("late").status()), "MESSAGE_NOT_FOUND");

  // Other scopes, and the project's cto, are unaffected.
  EXPECT_TRUE(store->ReserveRole(LeadReservation(kOtherLead, "scp_2")).ok());
  RoleReservation cto = LeadReservation("rk2.cto-key", "");
  cto.role_kind = "cto";
  EXPECT_TRUE(store->ReserveRole(cto).ok());
  EXPECT_TRUE(store->InsertMessage(RoleMsg("fine", kOtherLead), {}).ok());
}

TEST(ScopeClose, DeadLetteredBacklogStopsCountingInTheHoldersInbox) {
  auto store = OpenOrDie(FreshDbPath());
  // The holder's inbox is full (limit 1) with the role message handed to it.
  ASSERT_TRUE(store->InsertMessage(RoleMsg("handed"), {}).ok());
  ASSERT_TRUE(store->AddRecipient("handed", "holder").ok());
  MessageRecord direct = RoleMsg("direct");
  direct.role_key_wire.reset();
  direct.to_agent = "holder";
  EXPECT_EQ(
      ReasonOf(store->InsertMessageDelivering(direct, {"holder"}, {}, kNow, 1)
                   .status()),
      "LIMIT_EXCEEDED");
  ASSERT_TRUE(store->CloseLeadScope(Close()).ok());
  EXPECT_TRUE(
      store->InsertMessageDelivering(direct, {"holder"}, {}, kNow, 1).ok());
}

TEST(ScopeClose, ClosedScopesAreListedByWireAndFilteredByProjectAndScope) {
  auto store = OpenOrDie(FreshDbPath());
  EXPECT_TRUE(store->ListClosedScopes({})->empty());
  ASSERT_TRUE(store->InsertMessage(RoleMsg("m1", "rk2.c"), {}).ok());
  auto close = [&](const std::string& project, const std::string& scope,
                   const std::string& wire) {
    ScopeClose c = Close(wire, scope);
    c.project_id = project;
    ASSERT_TRUE(store->CloseLeadScope(c).ok());
  };
  close("prj_1", "scp_c", "rk2.c");
  close("prj_2", "scp_a", "rk2.a");
  close("prj_1", "scp_b", "rk2.b");
  ASSERT_TRUE(store->CloseLeadScope(Close("rk2.b", "scp_b")).ok());  // again

  absl::StatusOr<std::vector<ClosedScopeRecord>> all =
      store->ListClosedScopes({});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].role_key_wire, "rk2.a");
  EXPECT_EQ((*all)[1].role_key_wire, "rk2.b");
  EXPECT_EQ((*all)[2].role_key_wire, "rk2.c");
  const ClosedScopeRecord& c = (*all)[2];
  EXPECT_EQ(c.project_id, "prj_1");
  EXPECT_EQ(c.scope_id, "scp_c");
  EXPECT_EQ(c.closed_at_ms, kNow + 50);
  EXPECT_EQ(c.closed_by, "ops");
  EXPECT_EQ(c.reason, "scope finished");
  EXPECT_EQ(c.dead_lettered_count, 1);
  EXPECT_EQ((*all)[0].dead_lettered_count, 0);

  ClosedScopeFilter project;
  project.project_id = "prj_1";
  absl::StatusOr<std::vector<ClosedScopeRecord>> of_project =
      store->ListClosedScopes(project);
  ASSERT_EQ(of_project->size(), 2u);
  EXPECT_EQ((*of_project)[0].scope_id, "scp_b");
  EXPECT_EQ((*of_project)[1].scope_id, "scp_c");
  ClosedScopeFilter scope = project;
  scope.scope_id = "scp_c";
  ASSERT_EQ(store->ListClosedScopes(scope)->size(), 1u);
  scope.project_id = "prj_2";
  EXPECT_TRUE(store->ListClosedScopes(scope)->empty());
  ClosedScopeFilter scope_only;
  scope_only.scope_id = "scp_a";
  ASSERT_EQ(store->ListClosedScopes(scope_only)->size(), 1u);
}

TEST(ScopeClose, TheRecordSurvivesAReopen) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store->CloseLeadScope(Close()).ok());
  }
  auto store = OpenOrDie(path);
  EXPECT_EQ(ReasonOf(store->ReserveRole(LeadReservation()).status()),
            "ROLE_SCOPE_CLOSED");
  EXPECT_EQ((*store->GetClosedScope(kLead))->closed_by, "ops");
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT count(*) FROM hub_closed_scopes"), "1");
}

}  // namespace
}  // namespace hub::storage
