#include "registry/role_transitions.h"

#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "status/status.h"

namespace hub {
namespace {

// Everything below is typed by hand from TRIFLUX-HUB.md §5.1/§5.2 (and, for
// hub's manager_disabled rows, docs/design/roles.md), not derived from the
// code under test, so a slip in either shows up as a mismatch.

struct StateName {
  RoleState state;
  const char* name;
};

constexpr StateName kStates[] = {
    {RoleState::kElectable, "electable"},
    {RoleState::kElectedProbing, "elected-probing"},
    {RoleState::kActive, "active"},
    {RoleState::kUnreachable, "unreachable"},
    {RoleState::kQuarantined, "quarantined"},
};

struct TriggerName {
  RoleTrigger trigger;
  const char* name;
};

constexpr TriggerName kTriggers[] = {
    {RoleTrigger::kCandidateSelected, "candidate_selected"},
    {RoleTrigger::kStandupReserved, "standup_reserved"},
    {RoleTrigger::kNoCandidate, "no_candidate"},
    {RoleTrigger::kCandidatesExcluded, "candidates_excluded"},
    {RoleTrigger::kProbeSucceeded, "probe_succeeded"},
    {RoleTrigger::kActivationAcked, "activation_acked"},
    {RoleTrigger::kProbeFailed, "probe_failed"},
    {RoleTrigger::kWakeFailed, "wake_failed"},
    {RoleTrigger::kAckTimeout, "ack_timeout"},
    {RoleTrigger::kHolderLeaseExpired, "holder_lease_expired"},
    {RoleTrigger::kHolderOffline, "holder_offline"},
    {RoleTrigger::kTransportFailed, "transport_failed"},
    {RoleTrigger::kCharterReissued, "charter_reissued"},
    {RoleTrigger::kAlternateCandidateAvailable,
     "alternate_candidate_available"},
    {RoleTrigger::kRetryDue, "retry_due"},
    {RoleTrigger::kRetriesExhausted, "retries_exhausted"},
    {RoleTrigger::kExclusionExpired, "exclusion_expired"},
    {RoleTrigger::kCandidateRegistered, "candidate_registered"},
    {RoleTrigger::kLocatorRegistered, "locator_registered"},
    {RoleTrigger::kCapabilityRegistered, "capability_registered"},
    {RoleTrigger::kStaleAck, "stale_ack"},
    {RoleTrigger::kScopeClosed, "scope_closed"},
    {RoleTrigger::kManagerDisabled, "manager_disabled"},
};

struct ActionName {
  RoleAction action;
  const char* name;
};

constexpr ActionName kActions[] = {
    {RoleAction::kReserveHolder, "reserve_holder"},
    {RoleAction::kReserveStandup, "reserve_standup"},
    {RoleAction::kRecordBlockedNoCandidate, "record_blocked_no_candidate"},
    {RoleAction::kScheduleExclusionExpiry, "schedule_exclusion_expiry"},
    {RoleAction::kSendActivation, "send_activation"},
    {RoleAction::kRecordActivationAck, "record_activation_ack"},
    {RoleAction::kExcludeFailedCandidate, "exclude_failed_candidate"},
    {RoleAction::kRevokeHolderEpochFence, "revoke_holder_epoch_fence"},
    {RoleAction::kRevokeHolderPreserveBacklog,
     "revoke_holder_preserve_backlog"},
    {RoleAction::kFenceActiveAuthority, "fence_active_authority"},
    {RoleAction::kReserveReack, "reserve_reack"},
    {RoleAction::kFailoverCandidate, "failover_candidate"},
    {RoleAction::kReserveRetryEpoch, "reserve_retry_epoch"},
    {RoleAction::kScheduleQuarantine, "schedule_quarantine"},
    {RoleAction::kRestoreCandidateEligibility, "restore_candidate_eligibility"},
    {RoleAction::kClearQuarantine, "clear_quarantine"},
    {RoleAction::kRejectStaleAck, "reject_stale_ack"},
    {RoleAction::kRemoveRegistry, "remove_registry"},
    {RoleAction::kFenceManagerDisabled, "fence_manager_disabled"},
};

// One §5.2 row by name. `to` is nullptr for a removed row; `code` is the
// result code or nullptr.
struct ExpectedRow {
  const char* from;
  const char* trigger;
  const char* to;
  const char* action;
  const char* code;
};

constexpr ExpectedRow kExpectedTable[] = {
    {"electable", "candidate_selected", "elected-probing", "reserve_holder",
     nullptr},
    {"electable", "standup_reserved", "elected-probing", "reserve_standup",
     nullptr},
    {"electable", "no_candidate", "electable", "record_blocked_no_candidate",
     nullptr},
    {"electable", "candidates_excluded", "quarantined",
     "schedule_exclusion_expiry", nullptr},
    {"elected-probing", "probe_succeeded", "elected-probing", "send_activation",
     nullptr},
    {"elected-probing", "activation_acked", "active", "record_activation_ack",
     nullptr},
    {"elected-probing", "probe_failed", "unreachable",
     "exclude_failed_candidate", nullptr},
    {"elected-probing", "wake_failed", "unreachable",
     "exclude_failed_candidate", nullptr},
    {"elected-probing", "ack_timeout", "unreachable",
     "exclude_failed_candidate", nullptr},
    {"elected-probing", "holder_lease_expired", "electable",
     "revoke_holder_epoch_fence", nullptr},
    {"active", "holder_lease_expired", "electable",
     "revoke_holder_preserve_backlog", nullptr},
    {"active", "holder_offline", "electable", "revoke_holder_preserve_backlog",
     nullptr},
    {"active", "transport_failed", "unreachable", "fence_active_authority",
     nullptr},
    {"active", "charter_reissued", "elected-probing", "reserve_reack", nullptr},
    {"unreachable", "alternate_candidate_available", "electable",
     "failover_candidate", nullptr},
    {"unreachable", "retry_due", "elected-probing", "reserve_retry_epoch",
     nullptr},
    {"unreachable", "retries_exhausted", "quarantined", "schedule_quarantine",
     nullptr},
    {"quarantined", "exclusion_expired", "electable",
     "restore_candidate_eligibility", nullptr},
    {"quarantined", "candidate_registered", "electable", "clear_quarantine",
     nullptr},
    {"quarantined", "locator_registered", "electable", "clear_quarantine",
     nullptr},
    {"quarantined", "capability_registered", "electable", "clear_quarantine",
     nullptr},
    {"electable", "stale_ack", "electable", "reject_stale_ack", "STALE_EPOCH"},
    {"elected-probing", "stale_ack", "elected-probing", "reject_stale_ack",
     "STALE_EPOCH"},
    {"active", "stale_ack", "active", "reject_stale_ack", "STALE_EPOCH"},
    {"unreachable", "stale_ack", "unreachable", "reject_stale_ack",
     "STALE_EPOCH"},
    {"quarantined", "stale_ack", "quarantined", "reject_stale_ack",
     "STALE_EPOCH"},
    {"electable", "scope_closed", nullptr, "remove_registry", nullptr},
    {"elected-probing", "scope_closed", nullptr, "remove_registry", nullptr},
    {"active", "scope_closed", nullptr, "remove_registry", nullptr},
    {"unreachable", "scope_closed", nullptr, "remove_registry", nullptr},
    {"quarantined", "scope_closed", nullptr, "remove_registry", nullptr},
    // hub's kill switch rows (docs/design/roles.md)
    {"electable", "manager_disabled", "electable", "fence_manager_disabled",
     nullptr},
    {"elected-probing", "manager_disabled", "electable",
     "fence_manager_disabled", nullptr},
    {"active", "manager_disabled", "electable", "fence_manager_disabled",
     nullptr},
    {"unreachable", "manager_disabled", "electable", "fence_manager_disabled",
     nullptr},
    {"quarantined", "manager_disabled", "electable", "fence_manager_disabled",
     nullptr},
};

// The hand-typed row for (from, trigger), or nullptr.
const ExpectedRow* FindExpected(const char* from, const char* trigger) {
  for (const ExpectedRow& row : kExpectedTable) {
    if (std::string(row.from) == from && std::string(row.trigger) == trigger) {
      return &row;
    }
  }
  return nullptr;
}

// Checks `actual` against `expected` field by field, by name.
void ExpectRowMatches(const RoleTransition& actual,
                      const ExpectedRow& expected) {
  EXPECT_EQ(RoleStateName(actual.from), expected.from);
  EXPECT_EQ(RoleTriggerName(actual.trigger), expected.trigger);
  if (expected.to == nullptr) {
    EXPECT_FALSE(actual.to.has_value()) << RoleStateName(*actual.to);
  } else {
    ASSERT_TRUE(actual.to.has_value());
    EXPECT_EQ(RoleStateName(*actual.to), expected.to);
  }
  EXPECT_EQ(RoleActionName(actual.action), expected.action);
  if (expected.code == nullptr) {
    EXPECT_FALSE(actual.result_code.has_value()) << *actual.result_code;
  } else {
    ASSERT_TRUE(actual.result_code.has_value());
    EXPECT_EQ(*actual.result_code, expected.code);
  }
}

void ExpectInvalidTransition(const absl::StatusOr<RoleTransition>& result,
                             absl::string_view from,
                             absl::string_view trigger) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(result.status()), "INVALID_ROLE_TRANSITION");
  EXPECT_TRUE(absl::StrContains(result.status().message(), from))
      << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), trigger))
      << result.status();
}

TEST(RoleTransitionsTest, TableHasThe31RowsOfTheSpecInOrderThenHubsFive) {
  absl::Span<const RoleTransition> table = RoleTransitionTable();
  EXPECT_EQ(kSpecRoleTransitionCount, 31u);
  ASSERT_EQ(table.size(), 36u);
  ASSERT_EQ(std::size(kExpectedTable), 36u);
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "row " << i);
    ExpectRowMatches(table[i], kExpectedTable[i]);
  }
}

TEST(RoleTransitionsTest, NoPairAppearsTwiceInTheTable) {
  std::set<std::pair<RoleState, RoleTrigger>> seen;
  for (const RoleTransition& row : RoleTransitionTable()) {
    EXPECT_TRUE(seen.emplace(row.from, row.trigger).second)
        << RoleStateName(row.from) << " + " << RoleTriggerName(row.trigger);
  }
}

TEST(RoleTransitionsTest, EveryPairReducesToItsRowOrIsAnInvalidTransition) {
  int valid = 0;
  int invalid = 0;
  for (const StateName& state : kStates) {
    for (const TriggerName& trigger : kTriggers) {
      SCOPED_TRACE(testing::Message() << state.name << " + " << trigger.name);
      const ExpectedRow* expected = FindExpected(state.name, trigger.name);
      absl::StatusOr<RoleTransition> by_enum =
          ReduceRoleTransition(state.state, trigger.trigger);
      absl::StatusOr<RoleTransition> by_name = ReduceRoleTransition(
          absl::string_view(state.name), absl::string_view(trigger.name));
      if (expected != nullptr) {
        ++valid;
        ASSERT_TRUE(by_enum.ok()) << by_enum.status();
        ASSERT_TRUE(by_name.ok()) << by_name.status();
        ExpectRowMatches(*by_enum, *expected);
        ExpectRowMatches(*by_name, *expected);
      } else {
        ++invalid;
        ExpectInvalidTransition(by_enum, state.name, trigger.name);
        ExpectInvalidTransition(by_name, state.name, trigger.name);
      }
    }
  }
  EXPECT_EQ(valid, 36);
  EXPECT_EQ(invalid, 79);
}

TEST(RoleTransitionsTest, CharterReissuedOnActiveReservesAReack) {
  absl::StatusOr<RoleTransition> t =
      ReduceRoleTransition(RoleState::kActive, RoleTrigger::kCharterReissued);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->to, RoleState::kElectedProbing);
  EXPECT_EQ(t->action, RoleAction::kReserveReack);
}

TEST(RoleTransitionsTest, ProbeSucceededOnActiveIsAnInvalidTransition) {
  absl::StatusOr<RoleTransition> t =
      ReduceRoleTransition(RoleState::kActive, RoleTrigger::kProbeSucceeded);
  ExpectInvalidTransition(t, "active", "probe_succeeded");
}

TEST(RoleTransitionsTest, StaleAckKeepsTheStateAndReportsStaleEpochInAll5) {
  for (const StateName& state : kStates) {
    SCOPED_TRACE(state.name);
    absl::StatusOr<RoleTransition> t =
        ReduceRoleTransition(state.state, RoleTrigger::kStaleAck);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->to, state.state);
    EXPECT_EQ(t->action, RoleAction::kRejectStaleAck);
    EXPECT_EQ(t->result_code, "STALE_EPOCH");
  }
}

TEST(RoleTransitionsTest, OnlyStaleAckRowsCarryAResultCode) {
  for (const RoleTransition& row : RoleTransitionTable()) {
    EXPECT_EQ(row.result_code.has_value(),
              row.trigger == RoleTrigger::kStaleAck)
        << RoleStateName(row.from) << " + " << RoleTriggerName(row.trigger);
  }
}

TEST(RoleTransitionsTest, ScopeClosedRemovesTheRowFromAll5) {
  for (const StateName& state : kStates) {
    SCOPED_TRACE(state.name);
    absl::StatusOr<RoleTransition> t =
        ReduceRoleTransition(state.state, RoleTrigger::kScopeClosed);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE(t->to.has_value());
    EXPECT_EQ(t->action, RoleAction::kRemoveRegistry);
  }
}

TEST(RoleTransitionsTest, OnlyScopeClosedRowsRemoveTheRow) {
  for (const RoleTransition& row : RoleTransitionTable()) {
    EXPECT_EQ(!row.to.has_value(), row.trigger == RoleTrigger::kScopeClosed)
        << RoleStateName(row.from) << " + " << RoleTriggerName(row.trigger);
  }
}

TEST(RoleTransitionsTest, ADisabledManagerFencesEveryStateToElectable) {
  for (const StateName& state : kStates) {
    SCOPED_TRACE(state.name);
    absl::StatusOr<RoleTransition> t =
        ReduceRoleTransition(state.state, RoleTrigger::kManagerDisabled);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->to, RoleState::kElectable);
    EXPECT_EQ(t->action, RoleAction::kFenceManagerDisabled);
  }
  // Hub's rows come after the spec's and do not displace any of them.
  for (size_t i = 0; i < kSpecRoleTransitionCount; ++i) {
    EXPECT_NE(RoleTransitionTable()[i].trigger, RoleTrigger::kManagerDisabled);
  }
}

TEST(RoleTransitionsTest, LeaseExpiryWhileProbingRevokesInsteadOfProbeFailure) {
  absl::StatusOr<RoleTransition> t = ReduceRoleTransition(
      RoleState::kElectedProbing, RoleTrigger::kHolderLeaseExpired);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->to, RoleState::kElectable);
  EXPECT_NE(t->to, RoleState::kUnreachable);
  EXPECT_EQ(t->action, RoleAction::kRevokeHolderEpochFence);
  EXPECT_NE(t->action, RoleAction::kExcludeFailedCandidate);
}

TEST(RoleTransitionsTest, StateNamesRoundTrip) {
  for (const StateName& state : kStates) {
    EXPECT_EQ(RoleStateName(state.state), state.name);
    EXPECT_EQ(ParseRoleState(state.name), state.state) << state.name;
  }
}

TEST(RoleTransitionsTest, TriggerNamesRoundTrip) {
  for (const TriggerName& trigger : kTriggers) {
    EXPECT_EQ(RoleTriggerName(trigger.trigger), trigger.name);
    EXPECT_EQ(ParseRoleTrigger(trigger.name), trigger.trigger) << trigger.name;
  }
}

TEST(RoleTransitionsTest, ActionNamesAreTheSpecsSnakeCase) {
  for (const ActionName& action : kActions) {
    EXPECT_EQ(RoleActionName(action.action), action.name);
  }
}

TEST(RoleTransitionsTest, ParsersRejectNearMissesExactly) {
  for (const char* name : {"", "Active", "ACTIVE", " active", "active ",
                           "elected_probing", "electedProbing", "offline"}) {
    EXPECT_EQ(ParseRoleState(name), std::nullopt) << "'" << name << "'";
  }
  for (const char* name : {"", "Stale_Ack", "stale-ack", "staleAck",
                           "stale_ack ", "probe_success", "lease_expired"}) {
    EXPECT_EQ(ParseRoleTrigger(name), std::nullopt) << "'" << name << "'";
  }
}

TEST(RoleTransitionsTest, UnknownStateNameIsRoleReachabilityStateInvalid) {
  for (const char* trigger : {"stale_ack", "no_such_trigger"}) {
    SCOPED_TRACE(trigger);
    absl::StatusOr<RoleTransition> t =
        ReduceRoleTransition("offline", absl::string_view(trigger));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ReasonOf(t.status()), "ROLE_REACHABILITY_STATE_INVALID");
    EXPECT_TRUE(absl::StrContains(t.status().message(), "offline"))
        << t.status();
    EXPECT_TRUE(absl::StrContains(t.status().message(), trigger)) << t.status();
  }
}

TEST(RoleTransitionsTest, UnknownTriggerNameIsAnInvalidTransition) {
  absl::StatusOr<RoleTransition> t =
      ReduceRoleTransition("active", "no_such_trigger");
  ExpectInvalidTransition(t, "active", "no_such_trigger");
}

}  // namespace
}  // namespace hub
