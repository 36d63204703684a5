#include "registry/role_transitions.h"

#include <array>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr absl::string_view kStaleEpochCode = "STALE_EPOCH";
constexpr absl::string_view kStateInvalidReason =
    "ROLE_REACHABILITY_STATE_INVALID";
constexpr absl::string_view kInvalidTransitionReason =
    "INVALID_ROLE_TRANSITION";

// Every trigger, in declaration order; the parser walks it.
constexpr std::array<RoleTrigger, 23> kAllTriggers = {
    RoleTrigger::kCandidateSelected, RoleTrigger::kStandupReserved,
    RoleTrigger::kNoCandidate,       RoleTrigger::kCandidatesExcluded,
    RoleTrigger::kProbeSucceeded,    RoleTrigger::kActivationAcked,
    RoleTrigger::kProbeFailed,       RoleTrigger::kWakeFailed,
    RoleTrigger::kAckTimeout,        RoleTrigger::kHolderLeaseExpired,
    RoleTrigger::kHolderOffline,     RoleTrigger::kTransportFailed,
    RoleTrigger::kCharterReissued,   RoleTrigger::kAlternateCandidateAvailable,
    RoleTrigger::kRetryDue,          RoleTrigger::kRetriesExhausted,
    RoleTrigger::kExclusionExpired,  RoleTrigger::kCandidateRegistered,
    RoleTrigger::kLocatorRegistered, RoleTrigger::kCapabilityRegistered,
    RoleTrigger::kStaleAck,          RoleTrigger::kScopeClosed,
    RoleTrigger::kManagerDisabled,
};

using S = RoleState;
using T = RoleTrigger;
using A = RoleAction;

RoleTransition Row(S from, T trigger, S to, A action) {
  return RoleTransition{from, trigger, to, action, std::nullopt};
}

// stale_ack keeps the state: the ACK belongs to an older epoch and must not
// move the role, only be rejected with STALE_EPOCH.
RoleTransition StaleAck(S state) {
  return RoleTransition{state, T::kStaleAck, state, A::kRejectStaleAck,
                        std::string(kStaleEpochCode)};
}

RoleTransition ScopeClosed(S state) {
  return RoleTransition{state, T::kScopeClosed, std::nullopt,
                        A::kRemoveRegistry, std::nullopt};
}

// hub's kill switch (TRIFLUX-HUB §5.8: a disabled manager fences any
// authority to electable with a blocked_reason, epoch + 1), which §5.2 does
// not list.
RoleTransition ManagerDisabled(S state) {
  return Row(state, T::kManagerDisabled, S::kElectable,
             A::kFenceManagerDisabled);
}

using Table = std::array<RoleTransition, kSpecRoleTransitionCount + 5>;

// TRIFLUX-HUB.md §5.2, row for row, then hub's rows. Two rows carry the
// review's invariants: holder_lease_expired from elected-probing revokes the
// reservation (electable), it is not a probe failure (unreachable);
// charter_reissued on an active holder reserves a new epoch and requires a
// re-ACK.
const Table& TableRows() {
  static const Table* const kTable = new Table{
      // electable
      Row(S::kElectable, T::kCandidateSelected, S::kElectedProbing,
          A::kReserveHolder),
      Row(S::kElectable, T::kStandupReserved, S::kElectedProbing,
          A::kReserveStandup),
      Row(S::kElectable, T::kNoCandidate, S::kElectable,
          A::kRecordBlockedNoCandidate),
      Row(S::kElectable, T::kCandidatesExcluded, S::kQuarantined,
          A::kScheduleExclusionExpiry),
      // elected-probing
      Row(S::kElectedProbing, T::kProbeSucceeded, S::kElectedProbing,
          A::kSendActivation),
      Row(S::kElectedProbing, T::kActivationAcked, S::kActive,
          A::kRecordActivationAck),
      Row(S::kElectedProbing, T::kProbeFailed, S::kUnreachable,
          A::kExcludeFailedCandidate),
      Row(S::kElectedProbing, T::kWakeFailed, S::kUnreachable,
          A::kExcludeFailedCandidate),
      Row(S::kElectedProbing, T::kAckTimeout, S::kUnreachable,
          A::kExcludeFailedCandidate),
      Row(S::kElectedProbing, T::kHolderLeaseExpired, S::kElectable,
          A::kRevokeHolderEpochFence),
      // active
      Row(S::kActive, T::kHolderLeaseExpired, S::kElectable,
          A::kRevokeHolderPreserveBacklog),
      Row(S::kActive, T::kHolderOffline, S::kElectable,
          A::kRevokeHolderPreserveBacklog),
      Row(S::kActive, T::kTransportFailed, S::kUnreachable,
          A::kFenceActiveAuthority),
      Row(S::kActive, T::kCharterReissued, S::kElectedProbing,
          A::kReserveReack),
      // unreachable
      Row(S::kUnreachable, T::kAlternateCandidateAvailable, S::kElectable,
          A::kFailoverCandidate),
      Row(S::kUnreachable, T::kRetryDue, S::kElectedProbing,
          A::kReserveRetryEpoch),
      Row(S::kUnreachable, T::kRetriesExhausted, S::kQuarantined,
          A::kScheduleQuarantine),
      // quarantined
      Row(S::kQuarantined, T::kExclusionExpired, S::kElectable,
          A::kRestoreCandidateEligibility),
      Row(S::kQuarantined, T::kCandidateRegistered, S::kElectable,
          A::kClearQuarantine),
      Row(S::kQuarantined, T::kLocatorRegistered, S::kElectable,
          A::kClearQuarantine),
      Row(S::kQuarantined, T::kCapabilityRegistered, S::kElectable,
          A::kClearQuarantine),
      // any state
      StaleAck(S::kElectable),
      StaleAck(S::kElectedProbing),
      StaleAck(S::kActive),
      StaleAck(S::kUnreachable),
      StaleAck(S::kQuarantined),
      ScopeClosed(S::kElectable),
      ScopeClosed(S::kElectedProbing),
      ScopeClosed(S::kActive),
      ScopeClosed(S::kUnreachable),
      ScopeClosed(S::kQuarantined),
      // hub (docs/design/roles.md, "The transition kernel")
      ManagerDisabled(S::kElectable),
      ManagerDisabled(S::kElectedProbing),
      ManagerDisabled(S::kActive),
      ManagerDisabled(S::kUnreachable),
      ManagerDisabled(S::kQuarantined),
  };
  return *kTable;
}

}  // namespace

absl::Span<const RoleTransition> RoleTransitionTable() { return TableRows(); }

absl::StatusOr<RoleTransition> ReduceRoleTransition(RoleState from,
                                                    RoleTrigger trigger) {
  for (const RoleTransition& row : TableRows()) {
    if (row.from == from && row.trigger == trigger) return row;
  }
  return InvalidArgumentError(
      kInvalidTransitionReason,
      absl::StrCat("no role transition from state '", RoleStateName(from),
                   "' on trigger '", RoleTriggerName(trigger), "'"));
}

absl::StatusOr<RoleTransition> ReduceRoleTransition(absl::string_view from,
                                                    absl::string_view trigger) {
  std::optional<RoleState> state = ParseRoleState(from);
  if (!state.has_value()) {
    return InvalidArgumentError(kStateInvalidReason,
                                absl::StrCat("unknown role state '", from,
                                             "' (trigger '", trigger, "')"));
  }
  std::optional<RoleTrigger> event = ParseRoleTrigger(trigger);
  if (!event.has_value()) {
    return InvalidArgumentError(kInvalidTransitionReason,
                                absl::StrCat("unknown role trigger '", trigger,
                                             "' (state '", from, "')"));
  }
  return ReduceRoleTransition(*state, *event);
}

absl::string_view RoleTriggerName(RoleTrigger trigger) {
  switch (trigger) {
    case RoleTrigger::kCandidateSelected:
      return "candidate_selected";
    case RoleTrigger::kStandupReserved:
      return "standup_reserved";
    case RoleTrigger::kNoCandidate:
      return "no_candidate";
    case RoleTrigger::kCandidatesExcluded:
      return "candidates_excluded";
    case RoleTrigger::kProbeSucceeded:
      return "probe_succeeded";
    case RoleTrigger::kActivationAcked:
      return "activation_acked";
    case RoleTrigger::kProbeFailed:
      return "probe_failed";
    case RoleTrigger::kWakeFailed:
      return "wake_failed";
    case RoleTrigger::kAckTimeout:
      return "ack_timeout";
    case RoleTrigger::kHolderLeaseExpired:
      return "holder_lease_expired";
    case RoleTrigger::kHolderOffline:
      return "holder_offline";
    case RoleTrigger::kTransportFailed:
      return "transport_failed";
    case RoleTrigger::kCharterReissued:
      return "charter_reissued";
    case RoleTrigger::kAlternateCandidateAvailable:
      return "alternate_candidate_available";
    case RoleTrigger::kRetryDue:
      return "retry_due";
    case RoleTrigger::kRetriesExhausted:
      return "retries_exhausted";
    case RoleTrigger::kExclusionExpired:
      return "exclusion_expired";
    case RoleTrigger::kCandidateRegistered:
      return "candidate_registered";
    case RoleTrigger::kLocatorRegistered:
      return "locator_registered";
    case RoleTrigger::kCapabilityRegistered:
      return "capability_registered";
    case RoleTrigger::kStaleAck:
      return "stale_ack";
    case RoleTrigger::kScopeClosed:
      return "scope_closed";
    case RoleTrigger::kManagerDisabled:
      return "manager_disabled";
  }
  return "";  // Unreachable for a valid enum value.
}

std::optional<RoleTrigger> ParseRoleTrigger(absl::string_view name) {
  for (RoleTrigger trigger : kAllTriggers) {
    if (RoleTriggerName(trigger) == name) return trigger;
  }
  return std::nullopt;
}

absl::string_view RoleActionName(RoleAction action) {
  switch (action) {
    case RoleAction::kReserveHolder:
      return "reserve_holder";
    case RoleAction::kReserveStandup:
      return "reserve_standup";
    case RoleAction::kRecordBlockedNoCandidate:
      return "record_blocked_no_candidate";
    case RoleAction::kScheduleExclusionExpiry:
      return "schedule_exclusion_expiry";
    case RoleAction::kSendActivation:
      return "send_activation";
    case RoleAction::kRecordActivationAck:
      return "record_activation_ack";
    case RoleAction::kExcludeFailedCandidate:
      return "exclude_failed_candidate";
    case RoleAction::kRevokeHolderEpochFence:
      return "revoke_holder_epoch_fence";
    case RoleAction::kRevokeHolderPreserveBacklog:
      return "revoke_holder_preserve_backlog";
    case RoleAction::kFenceActiveAuthority:
      return "fence_active_authority";
    case RoleAction::kReserveReack:
      return "reserve_reack";
    case RoleAction::kFailoverCandidate:
      return "failover_candidate";
    case RoleAction::kReserveRetryEpoch:
      return "reserve_retry_epoch";
    case RoleAction::kScheduleQuarantine:
      return "schedule_quarantine";
    case RoleAction::kRestoreCandidateEligibility:
      return "restore_candidate_eligibility";
    case RoleAction::kClearQuarantine:
      return "clear_quarantine";
    case RoleAction::kRejectStaleAck:
      return "reject_stale_ack";
    case RoleAction::kRemoveRegistry:
      return "remove_registry";
    case RoleAction::kFenceManagerDisabled:
      return "fence_manager_disabled";
  }
  return "";  // Unreachable for a valid enum value.
}

}  // namespace hub
