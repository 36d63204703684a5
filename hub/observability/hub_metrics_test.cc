#include "hub/observability/hub_metrics.h"

#include <string>

#include "gtest/gtest.h"

namespace hub {
namespace {

RoleRecord Row(RoleState state, int64_t version, const std::string& holder = "",
               const std::string& previous = "") {
  RoleRecord row;
  row.role_key_wire = "rk2.test";
  row.state = state;
  row.version = version;
  if (!holder.empty()) row.holder_agent_id = holder;
  if (!previous.empty()) row.previous_holder_agent_id = previous;
  return row;
}

RoleEvent Event(RoleRecord row,
                RoleChangeKind kind = RoleChangeKind::kUpdated) {
  RoleEvent event;
  event.kind = kind;
  event.role = std::move(row);
  return event;
}

double RolesIn(HubMetrics& m, const std::string& state) {
  for (const MetricSample& s : m.RolesByState()) {
    if (s.labels[0] == state) return s.value;
  }
  return -1;
}

TEST(HubMetricsTest, ActivationUnderANewHolderCountsAsAFailover) {
  HubMetrics m;
  m.SeedRoles({Row(RoleState::kElectable, 0)});
  m.OnRoleEvent(Event(Row(RoleState::kElectedProbing, 1, "a")));
  m.OnRoleEvent(Event(Row(RoleState::kActive, 2, "a")));
  EXPECT_EQ(m.role_activations->Value({}), 1);
  EXPECT_EQ(m.role_failovers->Value({}), 0);
  // The holder is gone: fenced, then b is reserved and activates.
  m.OnRoleEvent(Event(Row(RoleState::kElectable, 3, "", "a")));
  m.OnRoleEvent(Event(Row(RoleState::kElectedProbing, 4, "b", "a")));
  m.OnRoleEvent(Event(Row(RoleState::kActive, 5, "b", "a")));
  EXPECT_EQ(m.role_activations->Value({}), 2);
  EXPECT_EQ(m.role_failovers->Value({}), 1);
  EXPECT_EQ(m.role_transitions->Value({"elected-probing", "active"}), 2);
  EXPECT_EQ(RolesIn(m, "active"), 1);
  EXPECT_EQ(RolesIn(m, "electable"), 0);
}

TEST(HubMetricsTest, TheSameHolderActivatingAgainIsNoFailover) {
  HubMetrics m;
  m.OnRoleEvent(Event(Row(RoleState::kElectedProbing, 1, "a", "a")));
  m.OnRoleEvent(Event(Row(RoleState::kActive, 2, "a", "a")));
  EXPECT_EQ(m.role_activations->Value({}), 1);
  EXPECT_EQ(m.role_failovers->Value({}), 0);
}

TEST(HubMetricsTest, OldOrRepeatedVersionsAreNotCountedTwice) {
  HubMetrics m;
  m.OnRoleEvent(Event(Row(RoleState::kActive, 5, "a")));
  m.OnRoleEvent(Event(Row(RoleState::kActive, 5, "a")));
  m.OnRoleEvent(
      Event(Row(RoleState::kElectable, 4)));     // older than what was seen
  m.SeedRoles({Row(RoleState::kElectable, 3)});  // a snapshot read earlier
  EXPECT_EQ(m.role_activations->Value({}), 1);
  EXPECT_EQ(RolesIn(m, "active"), 1);
}

TEST(HubMetricsTest, KernelDecisionsAreCountedAppliedByTriggerRefusedByPair) {
  HubMetrics m;
  RoleTransitionNote acked;
  acked.role_key_wire = "rk2.test";
  acked.from = RoleState::kElectedProbing;
  acked.trigger = RoleTrigger::kActivationAcked;
  acked.to = RoleState::kActive;
  acked.version = 2;
  m.OnRoleTransition(acked);
  RoleTransitionNote closed = acked;
  closed.from = RoleState::kActive;
  closed.trigger = RoleTrigger::kScopeClosed;
  closed.to = std::nullopt;
  m.OnRoleTransition(closed);
  RoleTransitionNote refused = acked;
  refused.from = RoleState::kActive;
  refused.trigger = RoleTrigger::kProbeSucceeded;
  refused.to = std::nullopt;
  refused.refused = true;
  m.OnRoleTransition(refused);
  m.OnRoleTransition(refused);
  EXPECT_EQ(m.role_kernel_transitions->Value(
                {"elected-probing", "activation_acked", "active"}),
            1);
  EXPECT_EQ(
      m.role_kernel_transitions->Value({"active", "scope_closed", "removed"}),
      1);
  EXPECT_EQ(m.role_transitions_refused->Value({"active", "probe_succeeded"}),
            2);
  EXPECT_EQ(m.role_kernel_transitions->Value(
                {"active", "probe_succeeded", "removed"}),
            0);
}

TEST(HubMetricsTest, RolesByStateListsEveryStateAndForgetsRemovedRoles) {
  HubMetrics m;
  EXPECT_EQ(m.RolesByState().size(), 5u);
  m.OnRoleEvent(Event(Row(RoleState::kQuarantined, 1)));
  EXPECT_EQ(RolesIn(m, "quarantined"), 1);
  m.OnRoleEvent(
      Event(Row(RoleState::kQuarantined, 2), RoleChangeKind::kRemoved));
  EXPECT_EQ(RolesIn(m, "quarantined"), 0);
}

TEST(HubMetricsTest, GroupCommitsFeedSizeAndLatencyHistograms) {
  HubMetrics m;
  m.OnGroupCommitted(3, absl::Milliseconds(2));
  m.OnGroupCommitted(1, absl::Milliseconds(1));
  EXPECT_EQ(m.commit_group_size->Count({}), 2);
  EXPECT_EQ(m.commit_group_size->Sum({}), 4);
  EXPECT_NEAR(m.commit_seconds->Sum({}), 0.003, 1e-9);
}

}  // namespace
}  // namespace hub
